"""The engines behind the arms: preflight checks, launching, their /metrics and their fingerprints.

- engine_metrics.py: Read an engine's Prometheus /metrics into one snapshot, whatever the engine.
- fingerprint.py: What an arm says about itself (engine version, model card, server args), kept with the
  session.
- launch.py: Arms that start their own engine: `record` launches an arm's engine for its turn and stops it
  after, so no two launched engines ever share the GPU.
- preflight.py: Check every arm before the first run: a missing key or a wrong model found after two arms were
  recorded costs half an hour of GPU time, so all problems are found at once and listed together.
"""
