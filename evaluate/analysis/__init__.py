"""Gathering and summarising results: loading, statistics, fairness, settings, convergence, references, validation
and the :class:`~evaluate.analysis.comparison.Comparison` every display reads; nothing here formats or draws.

``results.py`` loads a folder; ``stats.py``, ``summary.py``, ``fairness.py``, ``settings_diff.py``,
``convergence.py`` and ``references.py`` summarise and check; ``comparison.py`` holds the result of it all;
``validation.py`` the checks of ``python -m evaluate.validate``. Imports only itself below evaluate/
(tests/house/test_import_direction.py).
"""
