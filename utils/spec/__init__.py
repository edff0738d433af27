"""What tprimat runs: the registry of platforms, frameworks and models, and each model's shape.

``registry.py`` holds one row per platform, framework and model (a model's row: shape, Hub repository, tokenizer,
each vendor stack's name for it, line style); ``models.py`` sizes and cuts the shapes and counts their FLOPs;
``shape.py`` and ``tokenizer.py`` are the row's parts. Imports at most utils/io.
"""
