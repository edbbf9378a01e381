"""`record --ray`: one recorder worker per replica, placed on the node that serves it."""
