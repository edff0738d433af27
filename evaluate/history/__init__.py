"""The results database: every result tprimat made or was given, kept across runs (docs/RESULTS.md).

``target.py`` where the database is (SQLite file or PostgreSQL URL, the password never shown); ``store.py`` the
schema, its versions and migrations, and opening a database; ``record.py`` one result as stored rows;
``ingest.py`` adding files, folders and ``output.zip`` archives; ``query.py`` filters, run selectors and what
differs between runs (``history diff``); ``trend.py`` the series and their figure; ``gate.py`` applies the
regression rules of ``python -m evaluate.gate`` (train/settings/rules.json), ``gate_report.py`` is its typed report;
``noise.py`` the measured and published loss noise the cross-vendor tolerance comes from; ``cli.py``
``python -m evaluate.history``.
"""
