"""Which runs count, decided once: the one run-selection policy every figure uses.

Two questions, kept apart:

- **Is the measurement exact?** A run on the kernel clock is, however late the recording
  client woke (`Run.client_busy` says it was late; the kernel's receive times do not move), so
  it stays in every figure. One exception: when its first token was read together with later
  ones (`Clock.first_shared`), that read carries a later packet's time, so its TTFT may be late:
  the run keeps its decode figures and only its TTFT is left out of TTFT figures. A run on the
  user-space clock (no kernel times: another platform, a clock step) is exact only while its
  client was not busy, so it is left out when flagged client_busy.
- **Was the engine disturbed by its own host?** Only known for an endpoint on the recording
  machine (`Run.host`, Linux CPU pressure). A run flagged host_contended stays in the figures
  (its times are right; the report shows the flag and the pressure) unless the command asked
  to leave such runs out (`--exclude-host-contended`).

Besides these, a run counts only when it completed (`status == "ok"`), is not a warmup, and
was not contended by other traffic at the endpoint (`Run.contended`: it measured someone
else's load, not the arm).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.session.model import Run


def client_busy_inexact(run: Run) -> bool:
    """A busy client on the user-space clock: its stamps are as late as the client was."""
    return run.client_busy is True and (run.clock is None or run.clock.source != "kernel")


def first_token_late(run: Run) -> bool:
    """The first token's read also delivered later tokens: its time is a later packet's."""
    return run.clock is not None and run.clock.first_shared


def host_contended(run: Run) -> bool:
    """The engine's host (this machine) was under CPU pressure during the run."""
    return run.host is not None and run.host.contended


@dataclass(frozen=True)
class RunSelection:
    """The policy, built once per command from its flags and handed to every figure."""

    exclude_host_contended: bool = False

    def counts(self, run: Run) -> bool:
        """The run is in the figures (decode, TPOT, end to end, latency, answers, replay)."""
        return self.left_out_because(run) is None

    def counts_ttft(self, run: Run) -> bool:
        """The run's TTFT is in TTFT figures (it counts, and its first token's time is exact)."""
        return self.counts(run) and not first_token_late(run)

    def left_out_because(self, run: Run) -> str | None:
        """Why a measured run is in no figure ("failed", "contended", ...), or None when it counts."""
        if run.warmup:
            return "warmup"
        if run.status != "ok":
            return run.status
        if run.contended is True:
            return "contended"
        if client_busy_inexact(run):
            return "client busy"
        if self.exclude_host_contended and host_contended(run):
            return "host contended"
        return None

    def describe(self) -> str:
        """One sentence for reports: which runs the figures hold."""
        host = ("runs whose host was under CPU pressure are left out (--exclude-host-contended)"
                if self.exclude_host_contended else "runs whose host was under CPU pressure are kept and flagged")
        return (
            "Runs in the figures: measured, completed, not contended by other traffic at the endpoint; "
            "kernel-clock runs are kept however late the recorder woke (their times are the kernel's), "
            "user-clock runs are left out when the recorder was busy; a run whose first token was read "
            f"together with later ones keeps its decode figures but not its TTFT; {host}."
        )


DEFAULT_SELECTION = RunSelection()
