"""A catalogue: every prompt of several sessions in every layout and theme, rendered with one index page.

- index_page.py: DIR/index.html: every video of a catalogue with its poster, by session and prompt.
- jobs.py: A catalogue: every chosen prompt of every session in every layout and theme, as render jobs.
- run_jobs.py: Render a catalogue's jobs, with one progress count over all of them.
"""
