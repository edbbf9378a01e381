"""The gates: a run counts only on an idle endpoint, an undisturbed host and an idle GPU.

- gpu_gate.py: The GPU gate: is the GPU idle before an arm whose engine runs on this machine?
- host_gate.py: The host gate: was the engine disturbed by its own host?
- idle_gate.py: The idle gate and the contention check: a run is measured only on an endpoint nobody else
  uses.
"""
