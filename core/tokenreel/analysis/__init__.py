"""The analysis: a session's figures, ladder, intervals, claims, verdicts and plans, computed from the session model."""
