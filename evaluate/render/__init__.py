"""Displaying results: compare.md, the console tables, the figures and compare's files, from analysis/'s models.

``rows.py`` the cells every display shares (the page's too); ``markdown.py``, ``console.py``, ``validation.py`` the
texts; ``tables.py`` console and Markdown tables; ``plots.py``, ``quality_plot.py``, ``frameworks.py`` the figures
(through ``mpl.py``); ``mlperf.py`` compare's MLPerf rows; ``outputs.py`` compare's files. Imports analysis/ and
itself only (tests/house/test_import_direction.py).
"""
