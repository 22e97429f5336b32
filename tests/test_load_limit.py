"""``load_limit``: the newest messages, at most N, starting at a run's first message."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import MemoryContext, window_start
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run

# A transcript as runs; each run is a list of turn sizes (messages per append).
transcripts = st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=3), max_size=6)


def write(runs: list[list[int]]) -> list[tuple[str, dict[str, str]]]:
    store = DjangoMemoryStore()
    written = []
    for run_number, turns in enumerate(runs):
        run_id = f"run-{run_number}"
        for turn, size in enumerate(turns, start=1):
            role = "user" if turn == 1 else "tool"
            messages = [
                {"role": role if i == 0 else "assistant", "content": f"{run_id}/{turn}/{i}"}
                for i in range(size)
            ]
            run(store.append, append_input("s", messages, run_id=run_id, turn=turn))
            written += [(run_id, m) for m in messages]
    return written


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=transcripts, limit=st.integers(1, 12))
def test_the_window_is_the_longest_run_aligned_tail(runs: list[list[int]], limit: int) -> None:
    Conversation.objects.all().delete()
    written = write(runs)
    window = run(DjangoMemoryStore(load_limit=limit).load, MemoryContext("s"))

    assert len(window) <= limit
    expected_start = len(written) - len(window)
    assert window == [m for _, m in written[expected_start:]]
    run_ids = [r for r, _ in written]
    if window:
        # It starts where a run starts ...
        assert expected_start == 0 or run_ids[expected_start] != run_ids[expected_start - 1]
    # ... and no longer run-aligned tail would have fit.
    longer_starts = [i for i in range(expected_start) if i == 0 or run_ids[i] != run_ids[i - 1]]
    assert all(len(written) - i > limit for i in longer_starts)


def test_window_start_rejects_non_positive_limits() -> None:
    with pytest.raises(ValueError, match="limit"):
        window_start(["a"], 0)


@pytest.mark.django_db
def test_without_a_limit_load_returns_everything() -> None:
    written = write([[1, 2], [3]])
    assert run(DjangoMemoryStore().load, MemoryContext("s")) == [m for _, m in written]
