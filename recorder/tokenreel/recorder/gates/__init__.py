"""The gates: a run counts only on an idle endpoint, an undisturbed host and an idle GPU."""
