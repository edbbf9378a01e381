"""How fast the GPUs serving an arm can read memory: the datasheet figure of the card its name
matches (tokenreel's table, assets/hardware/bandwidth.toml), or the declared
`[session] hardware.bandwidth_gbps`.

At batch 1 every decode step reads all the weights, so this figure bounds the steps a second
(`tokenreel.analysis.roofline`). The GPU's name is NVML's, read before each arm (`Arm.gpu`),
else the declared `[session] hardware` ("1x H200"); several cards serving one arm (tensor
parallel) read their shares at once, so their bandwidths add up.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache

from tokenreel import assets
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import Arm

BANDWIDTH_KEY = "[session] hardware.bandwidth_gbps"
HARDWARE_KEY = '[session] hardware (e.g. "1x H200")'
GROUP = re.compile(r"^\s*(\d+)\s*x\s+(.+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Card:
    """One datasheet entry: its name, the words a GPU name must hold, GB/s, where it is from."""

    name: str
    match: tuple[str, ...]
    bandwidth_gbps: float
    source: str


@dataclass(frozen=True)
class Bandwidth:
    """The arm's memory bandwidth in GB/s with what it is (`card`: "1x NVIDIA H200") and where it
    came from; `gbps` None with `missing` saying why and the key to set."""

    gbps: float | None
    card: str = ""
    source: str = ""
    missing: str = ""


def _words(name: str) -> list[str]:
    """A GPU name as match words: lower case, "80 GB" written "80gb" as NVML writes it."""
    return re.findall(r"[a-z0-9]+", re.sub(r"(\d+)\s+gb\b", r"\1gb", name.lower()))


@cache
def cards() -> tuple[Card, ...]:
    """The shipped datasheet table, in matching order."""
    data = tomllib.loads(assets.file("hardware", "bandwidth.toml").read_text(encoding="utf-8"))
    return tuple(Card(c["name"], tuple(c["match"]), float(c["bandwidth_gbps"]), c["source"]) for c in data["card"])


def card_for(name: str) -> Card | None:
    """The first card whose match words all appear in `name` (NVML's or a declared one)."""
    words = set(_words(name))
    return next((card for card in cards() if set(card.match) <= words), None)


def _groups(hardware: str) -> list[tuple[int, str]]:
    """"2x NVIDIA H200 / 1x NVIDIA L4" -> [(2, "NVIDIA H200"), (1, "NVIDIA L4")]; a name without
    a count is one card."""
    groups = []
    for part in hardware.split(" / "):
        found = GROUP.match(part)
        groups.append((int(found.group(1)), found.group(2)) if found else (1, part.strip()))
    return [(n, name) for n, name in groups if name]


def arm_bandwidth(arm: Arm) -> Bandwidth:
    """The declared bandwidth, else the sum over the arm's GPUs (NVML's names, else the declared
    hardware) of their datasheet figures; missing when no GPU is known or one is not in the table."""
    declared = arm.settings.get("bandwidth_gbps")
    if declared:
        try:
            return Bandwidth(float(declared), arm.settings.get("hardware", ""), f"declared ({BANDWIDTH_KEY})")
        except ValueError:
            return Bandwidth(None, missing=f"bandwidth_gbps = {declared!r} is not a number of GB/s; set {BANDWIDTH_KEY}")
    hardware, source = gpu_hardware(arm.gpu), "NVML's GPU name"
    if not hardware:
        hardware, source = arm.settings.get("hardware", ""), "the declared hardware"
    if not hardware:
        return Bandwidth(None, missing=f"no GPU known (NVML read none: a remote endpoint or no NVIDIA driver);"
                                       f" set {HARDWARE_KEY} or {BANDWIDTH_KEY}")
    total, sources = 0.0, []
    for count, name in _groups(hardware):
        card = card_for(name)
        if card is None:
            return Bandwidth(None, hardware, missing=f"no datasheet bandwidth for {name!r} in tokenreel's table; set {BANDWIDTH_KEY}")
        total += count * card.bandwidth_gbps
        sources.append(card.source)
    return Bandwidth(total, hardware, f"{source}, {'; '.join(dict.fromkeys(sources))}")
