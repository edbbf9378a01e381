"""The analysis: a session's figures, ladder, intervals, claims, verdicts and plans, computed from the session
model.

- accuracy.py: Each arm's accuracy and each ladder step's paired test, from the runs' grades.
- answers.py: Same answers? Each arm's text against the reference arm's, and runs of one arm among themselves.
- causes.py: Why a re-recording differs: for each ladder row or ratio that differs, what moved with it.
- claims.py: Every speed-up a viewer is told, defined once: the report, the video and its end card print from
  here and compute none of their own.
- comparison.py: Did re-recording give the same numbers? Two sessions compared, each difference with its 95 %
  interval and a verdict (the views, md/json/csv, are in `tokenreel.report.compare`).
- decomposition.py: A drafter's speed-up split in two: more tokens a step, and the cost of a step.
- drafting.py: Which arm a speculative arm drafts for: the arm whose answers it must repeat.
- engine_figures.py: The engine's own word beside tokenreel's measurement: decode agreement, prompt-cache
  hits, a drafter seen in the stream, and builds that do not know their version.
- figures.py: How every output writes a figure: one rounding for the report, the terminal and the video.
- intervals.py: 95 % intervals on the ladder's ratios: how sure a speed-up is, with the prompt as the unit.
- ladder.py: From runs to the seeds' ladder: per-cell medians, like-for-like flags, ratios between arms.
- latency.py: Latency percentiles: p50/p90/p99 of TTFT, TPOT and inter-token latency, per arm and per cell.
- metrics.py: The one set of metric definitions used by report, record summaries and the video.
- planning.py: How many prompts a target interval needs, from a pilot session, before spending GPU hours.
- recording_facts.py: What two recordings were made on, and where they differ: the host, the GPUs, the engine
  build.
- replica_ladders.py: Each replica's own ladder: a session recorded on several replicas, figure by figure.
- run_variance.py: How much of a drafter arm's run-to-run spread acceptance explains.
- selection.py: Which runs count, decided once: the one run-selection policy every figure uses.
- verdicts.py: Same, faster, slower, or can't tell yet: a difference between two sessions, judged by its
  interval.
"""
