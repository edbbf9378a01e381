"""Grading: a run's answer held to its prompt's `Grading`, after the recording, never between runs.

- extract.py: the code or the value taken out of an answer.
- sandbox.py: a code answer run in a separate, limited process.
- confine.py: that process's first code: no network, limits, another user, then the answer.
- grader.py: one answer graded.
- session_grades.py: every counted run of a session's graded prompts graded.
"""
