"""A catalogue: every prompt of several sessions in every layout and theme, rendered with one index page."""
