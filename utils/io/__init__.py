"""The bottom layer: files read and written safely, and how an entry point answers a signal.

atomic writes, sanitising foreign text, bounded JSON input, hashing and its cache, output paths that cannot
leave their folder, and the one-line answer to SIGINT/SIGTERM/SIGHUP. Imports nothing else of the project.
"""
