"""Displaying results: compare.md, the console tables, the figures and compare's files, from analysis/'s models.

``rows.py`` the cells every display shares; ``markdown.py``, ``console.py``, ``validation.py`` the texts; ``plots.py``,
``quality_plot.py``, ``frameworks.py`` the figures; ``outputs.py`` compare's files. Imports analysis/ and itself only.
"""
