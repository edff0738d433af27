"""The results database: every result tprimat made or was given, kept across runs (docs/RESULTS.md).

``target.py`` where it is; ``store.py`` schema, migrations, opening; ``record.py`` one result as rows; ``ingest.py``
adding files; ``query.py`` filters, selectors and diffs; ``trend.py`` the series and figure; ``gate.py`` and
``gate_report.py`` the regression gate; ``noise.py`` the cross-vendor tolerance; ``cli.py`` the command.
"""
