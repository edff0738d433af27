"""The comparison as one self-contained HTML page a person opens: ``output/report.html`` (issue 37).

``markup.py`` the only way text enters the page (everything escaped unless built here as markup; figures inlined
as SVG); ``facts.py`` what the page shows, gathered once (the comparison of ``evaluate/analysis/comparison.py``,
the gate's JSON report, each run's quality block); ``database.py`` the results database's part through
``evaluate/history/``'s query API; ``sections.py`` the page's sections in reading order; ``page.py`` the document;
``cli.py`` ``python -m evaluate.report_html``. Nothing is imported here.
"""
