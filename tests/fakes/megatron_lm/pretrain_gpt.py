"""Stand-in entry point: preflight only checks that it exists."""
