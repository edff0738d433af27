"""tprimat data pipeline: fetch -> clean -> encode -> verify (see docs/ARCHITECTURE.md)."""
