"""What is benchmarked: the registry of platforms, frameworks and models; model shapes and FLOPs.

``registry.py`` holds one row per platform, framework and model (a model's row: shape, Hub repository, tokenizer,
each vendor stack's name for it, line style); ``models.py`` sizes and cuts the shapes and counts their FLOPs;
``shape.py`` and ``tokenizer.py`` are the row's parts.
"""
