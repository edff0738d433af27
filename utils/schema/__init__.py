"""The result's schema (version 2): one pydantic class per block, in modules by what the block records.

the rules every block follows (``block``), the size limits as plain numbers (``limits``), the machine
(``hardware``), what ran (``run``), what was measured (``measures``), time to quality (``quality``), MLPerf
(``mlperf``), the whole ``Result`` and its limits (``model``), and the version-1 migration (``v1``). Imports at most
utils/io and utils/spec.
"""
