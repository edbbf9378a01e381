"""Title card by default, its title, subtitle and logo, theme files, and a poster that shows
something: a PNG without --at is never a frame of empty panels."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import pytest
from PIL import Image, ImageDraw

from tests.session_factory import MS, session, stream, words
from tokenreel import assets
from tokenreel.base.theme import load_theme
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions, pin_files
from tokenreel.renderer.render import poster_index, render
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.session import archive
from tokenreel.session.model import Session

SMALL = "640x360"


@pytest.fixture(scope="module")
def two_arms() -> Session:
    return session(
        [
            ("a", "slow arm", [stream(["Hello", " world"] + words(60), 300 * MS, 10 * MS)]),
            ("b", "fast arm", [stream(["Hello", " world"] + words(60), 100 * MS, 5 * MS)]),
        ]
    )


@pytest.fixture
def logo_png(tmp_path: Path) -> Path:
    image = Image.new("RGBA", (120, 60), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.ellipse((2, 2, 58, 58), fill=(230, 60, 40, 255))
    draw.rectangle((66, 10, 118, 50), fill=(40, 160, 230, 180))
    path = tmp_path / "logo.png"
    image.save(path)
    return path


def plan_of(s: Session, **options: object) -> RenderPlan:
    return build_plan(s, RenderOptions(size=SMALL, hold_s="0", **options))  # type: ignore[arg-type]


def changed_box(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the pixels that differ; they must differ somewhere."""
    ys, xs = np.nonzero((a != b).any(axis=2))
    assert len(ys), "the frames are identical"
    return int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1


def test_title_card_is_on_by_default_for_1_5_s(two_arms: Session) -> None:
    assert RenderOptions().title_s == "1.5"
    on, off = plan_of(two_arms), plan_of(two_arms, title_s="0")
    assert on.clock.title_frames == 45  # 1.5 s at 30 fps
    assert off.clock.title_frames == 0
    assert on.frame_count == off.frame_count + 45
    renderer, bare = FrameRenderer(on), FrameRenderer(off)
    # the title card's frames are one card whose countdown fills (it moves from its second frame,
    # 33 ms in); then the race starts where it did without it
    first, second, last = renderer.render(0), renderer.render(1), renderer.render(44)
    bar = renderer.countdown_rect
    outside = np.ones(first.shape[:2], dtype=bool)
    outside[bar.slices] = False
    assert np.array_equal(first[outside], last[outside]) and not np.array_equal(first, second)
    assert (last[bar.slices] != first[bar.slices]).any(axis=2).sum() > (second[bar.slices] != first[bar.slices]).any(axis=2).sum()
    assert not np.array_equal(renderer.render(0), bare.render(0))
    for index in (0, 10, off.frame_count - 1):
        assert np.array_equal(renderer.render(45 + index), bare.render(index))


def test_title_defaults_come_from_the_session(two_arms: Session) -> None:
    plan = plan_of(two_arms)
    assert plan.title == two_arms.name
    assert plan.subtitle == plan.prompt_text
    named = plan_of(two_arms, title="Custom", subtitle="")
    assert (named.title, named.subtitle) == ("Custom", "")


def test_custom_title_changes_only_the_title_line(two_arms: Session) -> None:
    one, two = plan_of(two_arms, title="First title"), plan_of(two_arms, title="Another, longer title")
    a, b = FrameRenderer(one).render(0), FrameRenderer(two).render(0)
    top, bottom, _, _ = changed_box(a, b)
    painter_h = FrameRenderer(one).painters["headline"].line_h  # a title that fits is drawn in the headline's type
    assert bottom - top <= painter_h  # one line of title text, nothing else moved
    # the replay frames do not show the title card's title
    last = one.frame_count - 1
    assert np.array_equal(FrameRenderer(one).render(last), FrameRenderer(two).render(last))
    # a subtitle of its own changes the card below the title
    sub = FrameRenderer(plan_of(two_arms, title="First title", subtitle="A subtitle of my own")).render(0)
    assert changed_box(a, sub)[0] >= bottom


def test_logo_changes_pixels_only_in_its_corner(two_arms: Session, logo_png: Path) -> None:
    plain = plan_of(two_arms)
    logo = plan_of(two_arms, logo=str(logo_png))
    renderer = FrameRenderer(logo)
    box = renderer.logo_box()
    assert box is not None
    assert box.h == round(72 * logo.layout.scale) and box.w == 2 * box.h  # aspect kept
    assert box.right <= logo.width and box.x > logo.width // 2 and box.y < logo.height // 4  # top right
    a, b = FrameRenderer(plain).render(0), renderer.render(0)
    top, bottom, left, right = changed_box(a, b)
    assert box.y <= top and bottom <= box.bottom and box.x <= left and right <= box.right
    # the replay frames are untouched, and the same logo draws the same bytes again
    assert np.array_equal(FrameRenderer(plain).render(60), renderer.render(60))
    assert np.array_equal(FrameRenderer(plan_of(two_arms, logo=str(logo_png))).render(0), b)


def test_logo_is_pinned_by_hash(two_arms: Session, logo_png: Path, tmp_path: Path) -> None:
    options = pin_files(RenderOptions(size=SMALL, logo=str(logo_png)))
    assert options.logo_sha256 == hashlib.sha256(logo_png.read_bytes()).hexdigest()
    Image.new("RGBA", (10, 10), (1, 2, 3, 255)).save(logo_png)
    with pytest.raises(ValueError, match=r"^logo: .*logo\.png changed since it was pinned"):
        build_plan(two_arms, options)
    not_png = tmp_path / "logo.jpg"
    Image.new("RGB", (10, 10)).save(not_png, format="JPEG")
    with pytest.raises(ValueError, match=r"^logo: .*logo\.jpg is not a PNG"):
        plan_of(two_arms, logo=str(not_png))
    with pytest.raises(ValueError, match=r"^logo: cannot read"):
        plan_of(two_arms, logo=str(tmp_path / "missing.png"))


def shipped(name: str) -> dict[str, object]:
    return orjson.loads(assets.file("themes", f"{name}.json").read_bytes())


def test_theme_file_loads_like_a_shipped_theme(two_arms: Session, tmp_path: Path) -> None:
    data = shipped("light")
    data["background"] = "#203040"
    path = tmp_path / "mine.json"
    path.write_bytes(orjson.dumps(data))
    theme = load_theme(str(path))
    assert theme.background == (0x20, 0x30, 0x40)
    assert theme.text == load_theme("light").text
    plan = plan_of(two_arms, theme=str(path))
    assert tuple(FrameRenderer(plan).render(0)[0, 0]) == (0x20, 0x30, 0x40)
    pinned = pin_files(RenderOptions(size=SMALL, hold_s="0", theme=str(path)))
    assert pinned.theme_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(orjson.dumps(shipped("dark")))
    with pytest.raises(ValueError, match=r"^theme: .*mine\.json changed since it was pinned"):
        build_plan(two_arms, pinned)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"backgroud": "#000000"}, r"mine\.json: unknown key 'backgroud'"),
        ({"text": "white"}, r"mine\.json: key text must be a colour like '#12abef', got 'white'"),
        ({"accents": ["#123456", "#12345"]}, r"mine\.json: key accents\[1\] must be a colour"),
        ({"accents": []}, r"mine\.json: key 'accents' must be a non-empty list"),
        ({"syntax": {"code": "#ffffff"}}, r"mine\.json: key 'syntax' must have exactly"),
        ({"dim": None}, r"mine\.json: key dim must be a colour"),
    ],
)
def test_a_bad_theme_file_is_one_clear_error(tmp_path: Path, change: dict[str, object], message: str) -> None:
    data = {**shipped("dark"), **change}
    path = tmp_path / "mine.json"
    path.write_bytes(orjson.dumps(data))
    with pytest.raises(ValueError, match=r"^theme: .*" + message) as caught:
        load_theme(str(path))
    assert "\n" not in str(caught.value)


def test_theme_file_unreadable_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^theme: cannot read theme file .*nope\.json"):
        load_theme(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"^theme: .*bad\.json is not valid JSON"):
        load_theme(str(bad))
    missing = tmp_path / "short.json"
    missing.write_bytes(orjson.dumps({"background": "#000000"}))
    with pytest.raises(ValueError, match=r"^theme: .*short\.json lacks panel"):
        load_theme(str(missing))


def test_old_manifest_options_load_with_defaults() -> None:
    """Manifests written before these options record title_s explicitly and lack the rest."""
    old = {"align": "send", "arms": [], "at": None, "fps": 30, "hold_s": "4", "prompt": "code-1", "run": "median",
           "size": "1920x1080", "speed": "1", "theme": "dark", "title_s": "0"}
    options = manifests._Checker("x.render.json").options(old)
    assert options.title_s == "0"
    assert (options.title, options.subtitle, options.logo, options.logo_sha256, options.theme_sha256) == (None,) * 5


def test_png_poster_by_default_is_not_empty_panels(two_arms: Session, tmp_path: Path) -> None:
    for hold in ("1", "0"):  # the end card's first frame; without one, the final state
        options = RenderOptions(size=SMALL, fps=10, hold_s=hold)
        plan = build_plan(two_arms, options)
        index = poster_index(plan)
        assert index >= plan.clock.title_frames  # not the title card, not frame 0
        result = render(archive_path(two_arms, tmp_path), tmp_path / f"poster-{hold}.png", options)
        assert result is not None
        pixels = np.asarray(Image.open(tmp_path / f"poster-{hold}.png").convert("RGB"))
        for geo in plan.layout.columns:  # every arm's text area shows text
            area = pixels[geo.text.slices]
            assert (area != area[0, 0]).any(axis=2).mean() > 0.01


def archive_path(s: Session, tmp_path: Path) -> Path:
    path = tmp_path / "session.json"
    if not path.exists():
        archive.save(s, path)
    return path


def test_logo_and_theme_paths_in_the_manifest_are_relative_and_verify_after_a_move(
    two_arms: Session, logo_png: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like the session, the files a render names travel with its folder: the manifest keeps
    them relative to itself, and verify finds them from there, whatever the working directory."""
    from tokenreel.renderer.verify import verify_one

    project = tmp_path / "project"
    (project / "brand").mkdir(parents=True)
    theme = shipped("light")
    theme["background"] = "#203040"
    (project / "brand" / "mine.json").write_bytes(orjson.dumps(theme))
    (project / "brand" / "logo.png").write_bytes(logo_png.read_bytes())
    archive.save(two_arms, project / "s.json")
    monkeypatch.chdir(project)  # typed relative to the working directory, as a user would
    options = pin_files(RenderOptions(size="320x180", hold_s="0", title_s="0.2", logo="brand/logo.png", theme="brand/mine.json"))
    render(project / "s.json", project / "out" / "v.mp4", options)
    data = orjson.loads((project / "out" / "v.mp4.render.json").read_bytes())
    assert (data["options"]["logo"], data["options"]["theme"]) == ("../brand/logo.png", "../brand/mine.json")
    moved = tmp_path / "elsewhere"
    project.rename(moved)
    monkeypatch.chdir(tmp_path)
    result = verify_one(moved / "out" / "v.mp4.render.json")
    assert result.status == "identical", result.message
    data["options"]["logo"] = str(moved / "brand" / "logo.png")
    (moved / "out" / "v.mp4.render.json").write_bytes(orjson.dumps(data))
    with pytest.raises(manifests.ManifestError, match=r"field 'options\.logo': expected a path relative to the manifest"):
        manifests.load(moved / "out" / "v.mp4.render.json")
