"""The engines behind the arms: preflight checks, launching, their /metrics and their fingerprints."""
