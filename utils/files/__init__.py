"""Files tprimat writes and reads.

atomic writes, locks, output paths and room, the names tprimat generates (purge, wrap, build context), which run
owns a result, bounded JSON input, hashing.
"""
