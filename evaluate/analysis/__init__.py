"""Gathering and summarising results: loading, statistics, fairness, settings, convergence, references, validation
and the :class:`~evaluate.analysis.comparison.Comparison` every display reads; nothing here formats or draws.

``results.py`` loads, ``comparison.py`` holds it all, ``validation.py`` checks for ``python -m evaluate.validate``;
the rest summarise and check. Imports only itself below evaluate/.
"""
