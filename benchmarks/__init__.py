"""Benchmarks: DjangoMemoryStore against raw-driver baselines.

Run with ``python -m benchmarks`` (see ``--help`` and docs/benchmarks.md).
Not part of the test suite: speed is measured here, never asserted in tests.
"""
