"""Golden crops of the text engine: one text per script case, laid out and drawn as a column of
the video draws it, kept as PNGs under tests/golden/ and compared by the hash of their pixels.

    python -m tests.golden        # (make golden) redraw every crop; look at each before committing
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from PIL import Image

from tokenreel.base.theme import load_theme
from tokenreel.renderer.text.blocks import layout_stream
from tokenreel.renderer.text.highlight import content_styles
from tokenreel.renderer.text.painter import GlyphPainter

HERE = Path(__file__).parent / "golden"
SIZE = 24  # px: the body size of a 1440p column, big enough to see every mark
COLS = 34
# name -> (text, the caret's share of it shown: 1 is all); streamed from the start
CASES: dict[str, tuple[str, float]] = {
    "arabic": ("الرقم 42 هو الجواب، والكلمة code تبقى داخل الجملة العربية كما هي، والعدد 3.14 أيضا.", 1.0),
    "arabic-streaming": ("الرقم 42 هو الجواب، والكلمة code تبقى داخل الجملة العربية كما هي، والعدد 3.14 أيضا.", 0.45),
    "hebrew": ("שלום עולם: הגרסה 3.12 של Python יצאה בשנת 2023, והיא מהירה יותר.", 1.0),
    "mixed": ("Speed-up 2.4x: هذا أسرع بكثير (faster) than before, and עברית too.\n"
              "هذا السطر يبدأ بالعربية but ends in English 2024.", 1.0),
    "hangul": ("안녕하세요, 한국어 문장은 두 칸을 채웁니다. code 한글 123", 1.0),
    "devanagari": ("नमस्ते, क्षत्रिय हिन्दी में लिखा है। द्वितीय श्री", 1.0),
    "thai": ("สวัสดีครับ ภาษาไทย น้ำ ที่นี่ กรุงเทพฯ", 1.0),
    "emoji-zwj": ("family 👨\u200d👩\u200d👧 coder 👩\u200d💻 👩🏽\u200d💻 🏳\ufe0f\u200d🌈 keycap 1\ufe0f\u20e3", 1.0),
    "flags": ("flags 🇯🇵 🇺🇸 🇫🇷 🇧🇷 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", 1.0),
    "code": ("```python\ndef speedup(old: float, new: float) -> float:\n    return old / new  # 2.4x\n```", 1.0),
}


def draw(name: str) -> np.ndarray:
    """The case as the video's text region draws it (dark theme): its lines, one under another,
    the last one shown up to the caret."""
    text, share = CASES[name]
    painter = GlyphPainter(SIZE)
    theme = load_theme("dark")
    layout = layout_stream(text, content_styles(text, code=False), [round(len(text) * share)], COLS, SIZE)
    line, col = layout.caret[-1]
    rows = []
    for k in range(line + 1):
        cells = layout.lines[k]
        color = theme.color
        if k == line and cells and hasattr(cells[0], "pieces"):
            tile = painter.shaped(cells[0], col, color, theme.panel)
        else:
            tile = painter.paint(cells, color, theme.panel)
            if k == line:
                tile = tile[:, : col * painter.cell_w]
        row = np.empty((painter.line_h, COLS * painter.cell_w, 3), dtype=np.uint8)
        row[...] = theme.panel
        row[:, : tile.shape[1]] = tile
        rows.append(row)
    return np.concatenate(rows, axis=0)


def pixels_sha256(pixels: np.ndarray) -> str:
    return hashlib.sha256(str(pixels.shape).encode() + pixels.tobytes()).hexdigest()


def path(name: str) -> Path:
    return HERE / f"{name}.png"


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name in CASES:
        pixels = draw(name)
        Image.fromarray(pixels).save(path(name))
        print(f"{path(name)}: {pixels.shape[1]}x{pixels.shape[0]}, pixels sha256 {pixels_sha256(pixels)[:16]}")


if __name__ == "__main__":
    main()
