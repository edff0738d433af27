"""The comparison as one self-contained HTML page a person opens: ``output/report.html`` (issue 37).

``markup.py`` the only way text enters the page; ``facts.py`` what it shows, gathered once; ``database.py`` the
history part; ``sections.py`` the sections; ``page.py`` the document; ``cli.py`` the command.
"""
