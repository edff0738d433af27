"""The results database: every result tprimat made or was given, kept across runs (docs/RESULTS.md).

``store.py`` the schema, its versions and migrations, and opening a database (SQLite file or PostgreSQL URL);
``record.py`` one result as stored rows; ``ingest.py`` adding files, folders and ``output.zip`` archives;
``query.py`` filters and run selectors; ``trend.py``, ``diff.py`` the queries; ``gate.py`` applies the regression
rules of ``python -m evaluate.gate`` (train/settings/rules.json), ``gate_report.py`` is its typed report;
``noise.py`` the measured and published loss noise the cross-vendor tolerance comes from; ``cli.py``
``python -m evaluate.history``. Nothing is imported here, so that ``--help`` and the shell hook stay light.
"""
