"""The bottom layer: reading and writing files safely.

atomic writes, sanitising foreign text, bounded JSON input, hashing and its cache, and output paths that cannot
leave their folder. Imports nothing else of the project.
"""
