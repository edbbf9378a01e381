"""Every frame's SHA-256 as this machine renders it, to compare machines frame by frame.

The renderer promises the same pixels on every machine with the pinned wheels (no system
library on the path to a pixel). For each render manifest given, this re-renders every frame
with the manifest's options (no encoder: only the frames), checks them against the hashes the
manifest holds, and writes all of them, with the text engine's library versions and whether
Pillow's raqm (system FriBiDi) is there, to one JSON file; --compare reads two such files and
counts the frames that agree. It imports no encoder, so it runs from a folder of wheels.

    python bench/frame_hashes.py sessions/*.render.json --out here.json
    python bench/frame_hashes.py --compare here.json there.json
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
from pathlib import Path

import orjson
from PIL import features

from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.text import fonts
from tokenreel.session import archive


def frame_hashes(manifest_path: Path) -> dict[str, object]:
    """Render every frame the manifest describes; its hashes, and how many match the manifest's."""
    record = orjson.loads(manifest_path.read_bytes())
    options = RenderOptions(**{**record["options"], "arms": tuple(record["options"]["arms"])})
    plan = build_plan(archive.load(manifest_path.parent / record["session"]), options)
    renderer = FrameRenderer(plan)
    hashes = [hashlib.sha256(renderer.render(index).data).hexdigest() for index in range(plan.frame_count)]
    kept = record["frame_sha256"]
    if len(kept) == len(hashes):
        matching = sum(a == b for a, b in zip(kept, hashes, strict=False))
    else:  # a png manifest keeps its poster frame's hash only
        matching = int(kept == [hashes[record["poster_frame"]]])
    return {"frames": hashes, "match_manifest": matching, "manifest_hashes": len(kept)}


def compare(here: Path, there: Path) -> int:
    a, b = orjson.loads(here.read_bytes()), orjson.loads(there.read_bytes())
    print(f"{here}: {a['machine']}\n{there}: {b['machine']}")
    differ = 0
    for name in sorted(set(a["renders"]) | set(b["renders"])):
        ours, theirs = a["renders"].get(name, {}).get("frames", []), b["renders"].get(name, {}).get("frames", [])
        same = sum(x == y for x, y in zip(ours, theirs, strict=False))
        differ += same != len(ours) or len(ours) != len(theirs)
        print(f"  {name}: {same} of {len(ours)} frames identical ({len(theirs)} there)")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manifests", nargs="*", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        raise SystemExit(compare(*args.compare))
    machine = (
        f"{platform.machine()} {platform.platform()}, Python {platform.python_version()}, "
        f"raqm/FriBiDi present: {features.check('raqm')}"
    )
    print(machine)
    renders = {}
    for path in args.manifests:
        result = frame_hashes(path)
        renders[path.name] = result
        print(
            f"  {path.name}: {len(result['frames'])} frames rendered; "
            f"manifest hashes matched: {result['match_manifest']} of {result['manifest_hashes']}"
        )
    report = {"machine": machine, "versions": fonts.layout_versions(), "renders": renders}
    if args.out:
        args.out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    sys.exit(0 if all(r["match_manifest"] == r["manifest_hashes"] for r in renders.values()) else 1)


if __name__ == "__main__":
    main()
