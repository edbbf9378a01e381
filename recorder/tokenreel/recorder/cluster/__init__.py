"""`record --ray`: one recorder worker per replica, placed on the node that serves it.

- ray_placement.py: Where `record --ray` starts each replica's recorder worker: on the node that serves it.
- ray_recording.py: `record --ray`: one recorder worker per replica, on the node that serves it.
"""
