"""`--ray` (issue 28, items 3 and 4): a catalogue rendered as Ray tasks on a local Ray of 2 CPUs
(the `ray_head` of conftest, joined by its address as on a real cluster) is byte for byte the
local one-worker catalogue (`verify` re-renders it here); two videos really are in flight together; a cluster
that does not answer is one line, exit 2, nothing written."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tests.test_cli import run_cli
from tests.test_render_all import ARGS, NAMES, SHORT, outputs
from tests.test_render_signals import SESSION

# Both layouts in one theme: a wide and a tall video.
LAYOUTS = ["--layouts", "640x360,360x640", "--themes", "dark", "--prompts", "code-1", *SHORT]


def test_a_catalogue_on_ray_is_the_local_catalogue_byte_for_byte(ray_head: str, tmp_path: Path) -> None:
    session, folder = tmp_path / "seed.json", tmp_path / "ray"
    shutil.copyfile(SESSION, session)
    # two videos: 25 s in the suite on a quiet 2-core machine, 41 s beside two CPU hogs (Ray workers at our niceness)
    remote = run_cli("render-all", session, "--out", folder, *LAYOUTS, "--ray", ray_head, timeout=900)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.splitlines()[-1].endswith("(2 videos: 2 rendered, 0 kept, 0 failed)"), remote.stdout
    expected = sorted(folder / "seed" / f"{name}{ext}" for name in NAMES if name.endswith("-dark")
                      for ext in (".mp4", ".mp4.render.json", ".png", ".png.render.json"))
    assert outputs(folder) == sorted([*expected, folder / "index.html"])
    # verify re-renders every video and poster here, in one local process, and compares the bytes
    checked = run_cli("verify", folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert sorted(line.split(": ")[1] for line in checked.stdout.splitlines() if line.startswith("ok: ")) == [
        str(path) for path in expected if path.suffix == ".json"], checked.stdout
    assert all(": identical: " in line for line in checked.stdout.splitlines() if line.startswith("ok: "))
    again = run_cli("render-all", session, "--out", folder, *LAYOUTS, "--ray", ray_head)
    assert again.returncode == 0 and [line.split(": ")[0] for line in again.stdout.splitlines()] == ["kept"] * 2 + ["index"]


def test_the_cluster_renders_two_videos_at_once(ray_head: str, tmp_path: Path) -> None:
    """In this process, as render-all runs it: each video's chunks wait at a barrier that only
    two videos in flight together can pass (2 CPUs, 2 chunks a video: the next video is queued
    while one finishes)."""
    import ray

    from tokenreel.renderer.catalogue.jobs import catalogue, layouts
    from tokenreel.renderer.catalogue.run_jobs import RENDERED, render_catalogue
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.renderer.ray_chunks import cluster_cpus, run_chunks

    session = tmp_path / "seed.json"
    shutil.copyfile(SESSION, session)
    jobs = catalogue([session], tmp_path / "DIR", RenderOptions(title_s="0", hold_s="0"), layouts(["320x180"]),
                     ["dark", "light"], ["code-1"])
    barrier = threading.Barrier(2, timeout=120)

    def chunks(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        barrier.wait()
        return run_chunks(*args, **kwargs)

    ray.init(address=ray_head, include_dashboard=False, log_to_driver=False)
    try:
        assert cluster_cpus() == 2
        outcomes = render_catalogue(jobs, chunks=chunks, cpus=cluster_cpus())
    finally:
        ray.shutdown()
    assert [o.status for o in outcomes] == [RENDERED, RENDERED], [o.reason for o in outcomes]


def test_a_cluster_that_does_not_answer_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    session = tmp_path / "seed.json"
    shutil.copyfile(SESSION, session)
    result = run_cli("render-all", session, "--out", tmp_path / "DIR", *ARGS, "--ray", "127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no Ray cluster answers there" in result.stderr, result.stderr
    assert not any((tmp_path / "DIR").rglob("*.mp4"))


def test_without_ray_the_option_names_the_extra(tmp_path: Path) -> None:
    """A Python where `import ray` fails, as in an install without the extra."""
    session = tmp_path / "seed.json"
    shutil.copyfile(SESSION, session)
    no_ray = "import sys; sys.modules['ray'] = None; from tokenreel.cli import app; app(prog_name='tokenreel')"
    result = subprocess.run([sys.executable, "-c", no_ray, "render-all", str(session), "--out", str(tmp_path / "DIR"), *ARGS,
                             "--ray", "local"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "tokenreel: --ray needs Ray, an optional extra: pip install 'tokenreel[ray]'", result.stderr
    assert not (tmp_path / "DIR").exists() or not any((tmp_path / "DIR").rglob("*.mp4"))
