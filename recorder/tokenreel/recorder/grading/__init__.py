"""Grading: a run's answer held to its prompt's `Grading`, after the recording, never between runs.

`extract` takes the code or the value out of an answer, `sandbox` runs a code answer in a
separate, limited process, `grader` grades one answer, `session_grades` every counted run of a
session's graded prompts.
"""
