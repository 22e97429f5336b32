"""Choosing the newest part of a long transcript that a model can be given."""

from __future__ import annotations

from collections.abc import Sequence


def window_start(run_ids: Sequence[str], limit: int) -> int:
    """Where a window of at most ``limit`` messages begins.

    ``run_ids`` are the run ids of the newest ``limit + 1`` messages (or all
    of them, if fewer) in position order. The window starts at the first
    message of a run, so it never opens with an orphaned tool result or in
    the middle of a tool-call exchange. When the newest run alone is longer
    than ``limit`` the window is empty: returns ``len(run_ids)``.
    """
    if limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}")
    if len(run_ids) <= limit:
        return 0
    for index in range(len(run_ids) - limit, len(run_ids)):
        if run_ids[index] != run_ids[index - 1]:
            return index
    return len(run_ids)
