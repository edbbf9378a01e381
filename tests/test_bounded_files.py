"""Every file is read bounded and every output written atomically (issue 25, items 3, 4, 7, 8).

Real processes on real files: /dev/zero and a FIFO as theme, logo, config, prompts, or behind a
manifest's symlinks, fail at once with one line and exit 2; a device or FIFO under an output's
name is refused, --force or not; a symlinked --out keeps its link and locks its target; and
`report -o`, `compare -o` and `plot`, killed at random moments on a nearly full file system,
never leave a partial file under a final name.
"""

from __future__ import annotations

import math
import os
import random
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from PIL import Image

from tests.test_cli import REPO, write_config
from tests.test_render_encode import write_session
from tokenreel import assets
from tokenreel.renderer.options import RenderOptions, pin_files
from tokenreel.renderer.render import render
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError
from tokenreel.simulator.profiles import SEED_LADDER

GIB = 1 << 30
QUICK_S = 2.0  # issue 25: a hostile input file fails in under 2 s (beyond the command's own start-up)


def limited() -> None:
    """At most 2 GiB of memory: old code read /dev/zero until the kernel killed it."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))


def tokenreel(*args: object, cwd: Path = REPO, timeout: float = 120,
              preexec: Callable[[], None] = limited) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the CLI; returns the result and the seconds it took."""
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "tokenreel", *map(str, args)], capture_output=True, text=True,
                            timeout=timeout, cwd=cwd, preexec_fn=preexec)
    return result, time.monotonic() - start


Run = Callable[[], tuple[subprocess.CompletedProcess[str], float]]


def cost(hostile: Run, baseline: Run) -> tuple[subprocess.CompletedProcess[str], float]:
    """The hostile run's result and the seconds it took beyond the same command on a missing
    file (start-up and imports on a busy machine are not what the bound is about): the least
    of up to 3 tries, so one pause of a loaded machine is not taken for the file's cost."""
    least = math.inf
    for _ in range(3):
        result, seconds = hostile()
        least = min(least, seconds - baseline()[1])
        if least < QUICK_S:
            break
    return result, least


def hostile_run(*args: object, hostile: Path, missing: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """`cost` of the CLI run with `hostile` in args against `missing` in its place."""
    return cost(lambda: tokenreel(*args), lambda: tokenreel(*(missing if arg == hostile else arg for arg in args)))


def one_line_exit_2(result: subprocess.CompletedProcess[str], *words: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and all(word in lines[0] for word in words), lines[0]


@pytest.fixture(params=["device", "fifo"])
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """/dev/zero (never ends) or a FIFO nobody writes (would block forever), and its kind's name."""
    if request.param == "device":
        return Path("/dev/zero"), "a character device"
    fifo = tmp_path / "hostile.fifo"
    os.mkfifo(fifo)
    return fifo, "a FIFO"


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    return write_session(tmp_path / "s.json")


def test_a_hostile_theme_for_render_and_plot_fails_at_once(hostile: tuple[Path, str], session_file: Path,
                                                           tmp_path: Path) -> None:
    path, kind = hostile
    for args in (("render", session_file, "--out", tmp_path / "x.png"), ("plot", session_file, "-o", tmp_path / "c")):
        result, seconds = hostile_run(*args, "--theme", path, hostile=path, missing=tmp_path / "missing.json")
        one_line_exit_2(result, "theme", str(path), kind)
        print(f"{kind} as {args[0]}'s theme: fails {seconds:.2f} s beyond start-up")
        assert seconds < QUICK_S


def test_a_hostile_logo_fails_at_once(hostile: tuple[Path, str], session_file: Path, tmp_path: Path) -> None:
    path, kind = hostile
    result, seconds = hostile_run("render", session_file, "--out", tmp_path / "x.png", "--logo", path,
                                  hostile=path, missing=tmp_path / "missing.png")
    one_line_exit_2(result, "logo", str(path), kind)
    print(f"{kind} as the logo: fails {seconds:.2f} s beyond start-up")
    assert seconds < QUICK_S and not (tmp_path / "x.png").exists()


def test_a_hostile_config_fails_at_once(hostile: tuple[Path, str], tmp_path: Path) -> None:
    path, kind = hostile
    result, seconds = hostile_run("record", "--config", path, "--out", tmp_path / "s.json",
                                  hostile=path, missing=tmp_path / "missing.toml")
    one_line_exit_2(result, "--config", str(path), kind)
    print(f"{kind} as --config: fails {seconds:.2f} s beyond start-up")
    assert seconds < QUICK_S


def test_a_hostile_prompt_file_fails_at_once(hostile: tuple[Path, str], tmp_path: Path) -> None:
    path, kind = hostile
    config, baseline = write_config_naming(tmp_path / "c.toml", path), write_config_naming(tmp_path / "b.toml", tmp_path / "no")
    result, seconds = hostile_run("record", "--config", config, "--out", tmp_path / "s.json", hostile=config, missing=baseline)
    one_line_exit_2(result, "prompts", str(path), kind)
    print(f"{kind} as the prompt file: fails {seconds:.2f} s beyond start-up")
    assert seconds < QUICK_S


def write_config_naming(config: Path, prompts: str | Path = "builtin:ladder4") -> Path:
    """A config that loads (its endpoint is never reached), reading its prompts from `prompts`."""
    config.write_text(f'[session]\nname = "x"\nprompts = "{prompts}"\n[[arms]]\nid = "a"\n'
                      'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    return config


@pytest.fixture
def logo_render(tmp_path: Path) -> Path:
    """A sealed PNG render with a logo and a theme file, beside the manifest with its session
    (the manifest names them by relative paths)."""
    session_file = write_session(tmp_path / "s.json")
    Image.new("RGBA", (40, 20), (200, 40, 40, 255)).save(tmp_path / "logo.png")
    (tmp_path / "theme.json").write_bytes(assets.file("themes", "dark.json").read_bytes())
    options = RenderOptions(size="320x180", fps=10, hold_s="1", logo=str(tmp_path / "logo.png"),
                            theme=str(tmp_path / "theme.json"))
    return render(session_file, tmp_path / "out.png", pin_files(options)).manifest


@pytest.mark.parametrize("named", ["s.json", "logo.png", "theme.json"])
def test_verify_through_a_manifest_symlink_to_a_hostile_file_fails_at_once(
    logo_render: Path, hostile: tuple[Path, str], named: str,
) -> None:
    path, kind = hostile
    victim = logo_render.parent / named
    link = os.path.relpath(path, victim.parent)  # the manifest's relative name, now a link

    def missing() -> tuple[subprocess.CompletedProcess[str], float]:
        victim.unlink()
        try:
            return tokenreel("verify", logo_render)
        finally:
            victim.symlink_to(link)

    victim.unlink()
    victim.symlink_to(link)
    result, seconds = cost(lambda: tokenreel("verify", logo_render), missing)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert kind in result.stdout + result.stderr and named in result.stdout + result.stderr
    print(f"{kind} behind the manifest's {named}: verify fails {seconds:.2f} s beyond start-up")
    assert seconds < QUICK_S


# ---------------------------------------------------------------------------------------------
# Outputs that are not regular files


def test_record_force_never_replaces_a_device(tmp_path: Path) -> None:
    config = write_config_naming(tmp_path / "c.toml")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for out in (Path("/dev/null"), fifo):
        result, _ = tokenreel("record", "--config", config, "--out", out, "--force", "--no-preflight")  # never blocks
        one_line_exit_2(result, "--out", str(out), "not a regular file")
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()


def test_report_compare_and_plot_refuse_a_fifo_output_even_with_force(session_file: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    charts = tmp_path / "charts"
    charts.mkdir()
    os.mkfifo(charts / "ladder.png")
    for args in (("report", session_file, "-o", fifo, "--force"),
                 ("compare", session_file, session_file, "-o", fifo, "--force"),
                 ("plot", session_file, "-o", charts, "--force")):
        result, _ = tokenreel(*args)  # opening the FIFO to write would block past the timeout
        one_line_exit_2(result, "--out", "a FIFO", "not a regular file")
    assert fifo.is_fifo() and (charts / "ladder.png").is_fifo()
    assert [p.name for p in charts.iterdir()] == ["ladder.png"]


def test_report_through_a_symlink_writes_its_target_and_keeps_the_link(session_file: Path, tmp_path: Path) -> None:
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target.name)
    result, _ = tokenreel("report", session_file, "-o", link, "--force")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and orjson.loads(target.read_bytes())


# ---------------------------------------------------------------------------------------------
# A symlinked session: one lock, the link kept


def test_a_symlinked_out_locks_its_target(tmp_path: Path) -> None:
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    link.symlink_to(target.name)
    config = write_config_naming(tmp_path / "c.toml")
    with archive.SessionLock(target):
        result, _ = tokenreel("record", "--config", config, "--out", link, "--no-preflight")
        one_line_exit_2(result, f"pid {os.getpid()}")
    with archive.SessionLock(link), pytest.raises(ArchiveError, match="another `tokenreel record`"):
        archive.SessionLock(target).acquire()


def test_a_symlinked_out_records_into_its_target_and_stays_a_link(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8, prompts="random:16")
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    link.symlink_to(target.name)
    result, _ = tokenreel("record", "--config", config, "--out", link, timeout=120)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and archive.load(target).runs
    assert not list(tmp_path.glob(".*.lock")) and not list(tmp_path.glob(".*.tmp"))


# ---------------------------------------------------------------------------------------------
# A full disk and kills never leave a partial file under a final name


FSIZE = 2048  # bytes a child may write to one file: every output here is larger


def nearly_full() -> None:
    """The child's files may not grow past FSIZE (EFBIG, with SIGXFSZ ignored): a full disk."""
    limited()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, FSIZE))


def complete(path: Path) -> bool:
    """Whether a file under a final name is a whole file of its format."""
    data = path.read_bytes()
    if path.suffix == ".json":
        return bool(orjson.loads(data))
    if path.suffix == ".png":
        with Image.open(path) as image:
            image.load()
        return True
    if path.suffix == ".svg":
        return data.rstrip().endswith(b"</svg>")
    return data.rstrip().endswith(b"</html>")


def outputs_of(session_file: Path, folder: Path) -> list[tuple[tuple[object, ...], list[Path]]]:
    charts = folder / "charts"
    return [
        (("report", session_file, "-o", folder / "r.html", "--force"), [folder / "r.html"]),
        (("compare", session_file, session_file, "-o", folder / "c.json", "--force"), [folder / "c.json"]),
        (("plot", session_file, "-o", charts, "--force"), [charts / "ladder.png", charts / "ladder.svg"]),
    ]


def test_a_full_disk_fails_in_one_line_and_leaves_no_file(session_file: Path, tmp_path: Path) -> None:
    for args, finals in outputs_of(session_file, tmp_path):
        result, _ = tokenreel(*args, preexec=nearly_full)
        one_line_exit_2(result, "File too large")
        assert not any(path.exists() for path in finals), args
    leftovers = [p.name for p in tmp_path.rglob(".*") if p.suffix == ".tmp"]
    assert not leftovers


def test_kills_at_random_moments_never_leave_a_partial_output(session_file: Path, tmp_path: Path) -> None:
    """Each command is timed once, then killed at seeded random moments of its last part (where
    it writes), on a nearly full file system every other time."""
    rng = random.Random(25)
    kills = whole = 0
    for index, (args, _) in enumerate(outputs_of(session_file, tmp_path / "timing")):
        (tmp_path / "timing").mkdir(exist_ok=True)
        _, seconds = tokenreel(*args)
        for attempt in range(4):
            folder = tmp_path / f"{index}-{attempt}"
            folder.mkdir()
            args, finals = outputs_of(session_file, folder)[index]
            child = subprocess.Popen([sys.executable, "-m", "tokenreel", *map(str, args)], cwd=REPO,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=nearly_full if attempt % 2 else limited)
            time.sleep(rng.uniform(0.6, 1.1) * seconds)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            for path in finals:
                assert not path.exists() or complete(path), (args, path)
                whole += path.exists()
            kills += 1
    print(f"{kills} kills: {whole} whole outputs under their final names, no partial one")
