"""What users read of a plan or a run: rows of a session, the text summary and
``summary.json``, the Markdown report, a failed phase's text, ``--maestro-status`` and
``--maestro-analyze``. Values in, text out."""
