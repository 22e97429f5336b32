"""DjangoSaver passes LangGraph's own conformance suite
(``langgraph-checkpoint-conformance``'s ``validate()``), every capability,
base and extended, through its async API and through its sync one.

Both run in the test's transaction: ``async_to_sync`` gives the saver's
async calls the test's thread (persistence/threads/dispatch.py), and the
sync API is called there too.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from anvia_django.integrations.langgraph import DjangoSaver


class SyncAPISaver(DjangoSaver):
    """The suite calls the async methods: these call the sync ones."""

    async def aget_tuple(self, config: Any) -> Any:
        return await sync_to_async(self.get_tuple)(config)

    async def alist(self, config: Any, **options: Any) -> AsyncIterator[Any]:
        for found in await sync_to_async(lambda: list(self.list(config, **options)))():
            yield found

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(self.put)(*args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await sync_to_async(self.put_writes)(*args, **kwargs)

    async def adelete_thread(self, thread_id: str) -> None:
        await sync_to_async(self.delete_thread)(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await sync_to_async(self.delete_for_runs)(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await sync_to_async(self.copy_thread)(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await sync_to_async(self.prune)(thread_ids, strategy=strategy)


@pytest.mark.django_db
@pytest.mark.parametrize("saver_class", [DjangoSaver, SyncAPISaver], ids=["async", "sync"])
def test_every_capability_passes(saver_class: type[DjangoSaver]) -> None:
    async def fresh_saver() -> AsyncGenerator[DjangoSaver, None]:
        yield saver_class()

    registered = checkpointer_test(name=saver_class.__name__)(fresh_saver)
    report = async_to_sync(validate)(registered)

    failures = {
        name: result.failures for name, result in report.results.items() if not result.passed
    }
    assert failures == {}
    assert set(report.results) == {capability.value for capability in ALL_CAPABILITIES}
    # Each suite ran (none skipped as not implemented) and ran tests.
    assert all(result.detected and result.tests_passed > 0 for result in report.results.values())
