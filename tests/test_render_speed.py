"""What keeps a render's CPU near ffmpeg's own: start-up that loads only what a render uses, and
frame-path caches that give the same bytes as drawing and converting everything."""

from __future__ import annotations

import subprocess
import sys


def test_a_render_does_not_import_scipy() -> None:
    """scipy (about a second of CPU to import) serves only intervals and graded accuracy; a
    render imports the modules that hold them but never calls them."""
    code = (
        "import sys, tokenreel.renderer.render, tokenreel.cli.app, tokenreel.cli.render;"
        " print(sorted(m for m in sys.modules if m.startswith('scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
