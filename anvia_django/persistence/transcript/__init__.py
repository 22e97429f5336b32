"""The transcript: appends, loads, pops, clears and failed runs."""
