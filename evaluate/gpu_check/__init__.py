"""The GPU self-check (``python -m evaluate.gpu_check``): a new node's frameworks judged from their results.

``check.py`` reads and judges, ``model.py`` the typed record, ``render.py`` its text, ``cli.py`` the command.
"""
