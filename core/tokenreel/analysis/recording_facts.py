"""What two recordings were made on, and where they differ: the host, the GPUs, the engine build.

A re-recording that differs on the same weights and the same answers is most often explained
by the machine: another kernel, another driver, a lower power limit, another engine build. The
session archives these facts (`Session.host`: the recording machine, read when the session was
created; `Arm.gpu`: NVML's reading before each arm; the engine's version in the arm's
fingerprint), and `recording_differences` lists each one both sessions archive and that differs,
plus, once, the facts only one of them archives (an older file has no CPU model, say).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.analysis.engine_figures import stated_version
from tokenreel.analysis.figures import figure
from tokenreel.analysis.serving_config import serving_identity
from tokenreel.session.model import Arm, Session

# Session.host's keys as a reader names them, in the order they are listed.
HOST_FACTS = {
    "hostname": "host name",
    "platform": "platform",
    "kernel": "kernel",
    "cpu_model": "CPU",
    "cpus": "CPUs",
    "python": "Python",
}


@dataclass(frozen=True)
class FactDifference:
    """One recording fact that differs: its name, A's and B's value, the arms it holds for
    ("" for a fact of the whole session)."""

    fact: str
    a: str
    b: str
    arms: str = ""

    @property
    def text(self) -> str:
        where = f" ({self.arms})" if self.arms else ""
        return f"{self.fact}: {self.a} in A, {self.b} in B{where}"


def _host_facts(session: Session) -> dict[str, str]:
    facts = {name: session.host[key] for key, name in HOST_FACTS.items() if session.host.get(key)}
    if session.tool_version:
        facts["tokenreel"] = session.tool_version
    return facts


def _arm_facts(arm: Arm) -> dict[str, str]:
    """The engine build and the GPUs of the arm's last GPU check that read them (NVML's
    maximum clocks and enforced power limit: what the card was set to run at)."""
    facts = {}
    version = serving_identity(arm).get("version")
    if version:
        facts["engine build"] = stated_version(version)
    check = next((c for c in reversed(arm.gpu) if c.devices), None)
    if check is None:
        return facts
    devices = [d for d in check.devices if d.index in check.checked]
    readings = {
        "GPU": [d.name for d in devices],
        "GPU SM clock max": [figure(d.sm_clock_max_mhz, 0, " MHz") for d in devices if d.sm_clock_max_mhz is not None],
        "GPU memory clock max": [figure(d.mem_clock_max_mhz, 0, " MHz") for d in devices if d.mem_clock_max_mhz is not None],
        "GPU power limit": [figure(d.power_limit_mw / 1000, 0, " W") for d in devices if d.power_limit_mw is not None],
        "GPU driver": [check.driver] if check.driver else [],
        "CUDA (driver)": [check.cuda_driver] if check.cuda_driver else [],
    }
    facts.update({name: " / ".join(values) for name, values in readings.items() if values})
    return facts


def recording_differences(a: Session, b: Session) -> tuple[list[FactDifference], list[str]]:
    """(the facts that differ, one line naming the facts only one session archives, if any).

    Per-arm facts (engine build, GPUs) are compared arm by arm over the arms both have; the same
    difference on several arms is one entry naming them ("all arms" when it is every one)."""
    differences = _differ(_host_facts(a), _host_facts(b))
    missing: dict[str, set[str]] = {"A": set(), "B": set()}
    _note_missing(_host_facts(a), _host_facts(b), missing)
    arms_b = {arm.id: arm for arm in b.arms}
    shared = [arm for arm in a.arms if arm.id in arms_b]
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for arm in shared:
        facts_a, facts_b = _arm_facts(arm), _arm_facts(arms_b[arm.id])
        _note_missing(facts_a, facts_b, missing)
        for d in _differ(facts_a, facts_b):
            grouped.setdefault((d.fact, d.a, d.b), []).append(arm.id)
    for (fact, va, vb), arms in grouped.items():
        differences.append(FactDifference(fact, va, vb, "all arms" if len(arms) == len(shared) > 1 else ", ".join(arms)))
    lines = [f"not archived in {side}: {', '.join(sorted(names))}" for side, names in missing.items() if names]
    return differences, ["; ".join(lines)] if lines else []


def _differ(facts_a: dict[str, str], facts_b: dict[str, str]) -> list[FactDifference]:
    return [FactDifference(name, value, facts_b[name])
            for name, value in facts_a.items() if name in facts_b and facts_b[name] != value]


def _note_missing(facts_a: dict[str, str], facts_b: dict[str, str], missing: dict[str, set[str]]) -> None:
    missing["A"].update(set(facts_b) - set(facts_a))
    missing["B"].update(set(facts_a) - set(facts_b))
