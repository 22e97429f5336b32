"""``--profile W<n>``: where the store's time goes, with pyinstrument.

The persistence functions are called directly in this thread (the async
store would run them in asgiref's worker thread, which a profiler started
here does not sample); the thread hop itself is what W1 vs the raw
baseline shows.
"""

from __future__ import annotations

from collections.abc import Callable

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext
from anvia_django.persistence import append_messages, list_conversation_summaries, load_messages

from .fixtures import bulk_conversations, bulk_messages
from .workloads import QUICK, Sizes, batch_schedule, single_message_schedule, user_of


def _work(workload: str, sizes: Sizes) -> Callable[[], None]:
    if workload in ("W1", "W2", "W3"):
        schedule = batch_schedule(sizes) if workload == "W3" else single_message_schedule(sizes)
        inputs = [
            MemoryAppendInput(MemoryContext(s, user_id=user_of(s)), run_id, turn, messages)
            for s, run_id, turn, messages in schedule
        ]

        def append_all() -> None:
            for item in inputs:
                append_messages(item)

        return append_all
    if workload == "W4":
        bulk_messages("long", sizes.long_session)
        context = MemoryContext("long")

        def load_all() -> None:
            for _ in range(sizes.long_loads * 5):
                load_messages(context)

        return load_all
    if workload == "W5":
        bulk_conversations(0, sizes.list_large)

        def list_all() -> None:
            for _ in range(sizes.list_calls * 5):
                list_conversation_summaries(50)

        return list_all
    raise SystemExit(f"cannot profile {workload!r}; choose W1, W2, W3, W4 or W5")


def profile(workload: str, *, quick: bool) -> str:
    from pyinstrument import Profiler

    work = _work(workload.upper(), QUICK if quick else Sizes())
    profiler = Profiler(interval=0.0002)
    profiler.start()
    work()
    profiler.stop()
    return profiler.output_text(unicode=True, color=False, show_all=False)
