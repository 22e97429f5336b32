"""A conversation's lifecycle: run records, rewind, fork, compaction, and the
loaded history with positions."""
