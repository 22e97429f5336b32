"""``DjangoSaver``: LangGraph's checkpointer on Django's connections.

    from anvia_django.integrations.langgraph import DjangoSaver

    graph = builder.compile(checkpointer=DjangoSaver())
    graph.invoke(inputs, {"configurable": {"thread_id": "thread-1"}})

Every statement runs on Django's connection for the thread that runs it,
through its cursor. The async methods run where the memory store runs its
calls (``persistence/threads/dispatch.py``: the request's or
``async_to_sync``'s sync thread when there is one, else the store's own
threads). The sync ones run on the caller's thread when it is the main
thread or inside ``atomic()``, else on the store's threads: a sync graph
calls them from LangGraph's own worker threads, whose connections nothing
would close (``run_for_sync_caller``). The tables, each channel value
stored once per version, and encryption at rest: see :mod:`.models`.

Beyond LangGraph's base API it implements ``delete_for_runs``,
``copy_thread`` and ``prune``, and passes ``langgraph-checkpoint-conformance``
for all of them on SQLite, PostgreSQL and MariaDB. Two runs of one thread
at once never fork it unasked: the second to store after the same latest
checkpoint gets :class:`~.conflicts.ConcurrentRunError` (``conflicts.py``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from anvia_django.persistence.threads.dispatch import run_for_sync_caller, run_in_db_thread

from . import conflicts, copies, deltas, reads, removal, writes


class DjangoSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing into the app's tables on database
    ``using`` (the routers' choice for the app by default). ``serde``: any
    LangGraph ``SerializerProtocol`` (``JsonPlusSerializer`` by default)."""

    def __init__(self, *, serde: SerializerProtocol | None = None, using: str | None = None):
        super().__init__(serde=serde)
        self.using = using
        # The list channels this saver stored, to store the next versions as deltas.
        self.lists = deltas.Remembered()
        # Runs following their thread's latest that no config says so of.
        self.following = conflicts.Following()

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A channel's next version: its counter, zero-padded so that
        versions sort as they count, and a random part. Two branches of a
        thread (a fork) reach the same counter with different values, and
        a version names one stored value: the random part tells them apart."""
        if current is None:
            number = 0
        elif isinstance(current, int | float):
            number = int(current)  # a thread begun by a saver with numeric versions
        else:
            number = int(current.split(".", 1)[0])
        return f"{number + 1:032}.{secrets.token_hex(8)}"

    # Sync API: on the caller's thread, or a store thread for a framework's
    # worker threads (``run_for_sync_caller``).

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run_for_sync_caller(
            reads.latest_or_named, self.serde, config, using=self.using, following=self.following
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        rows = run_for_sync_caller(
            reads.matching, config, filter=filter, before=before, limit=limit, using=self.using
        )
        for batch in reads.batches(rows):
            yield from run_for_sync_caller(reads.with_values, self.serde, batch, using=self.using)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_for_sync_caller(
            writes.put_checkpoint,
            self.serde,
            config,
            checkpoint,
            metadata,
            new_versions,
            using=self.using,
            memory=self.lists,
            following=self.following,
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_for_sync_caller(
            _put_writes, self.serde, config, writes, task_id, task_path, using=self.using
        )

    def delete_thread(self, thread_id: str) -> None:
        run_for_sync_caller(removal.delete_threads, [thread_id], using=self.using)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_for_sync_caller(removal.delete_runs, self.serde, run_ids, using=self.using)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        run_for_sync_caller(
            copies.copy_thread, source_thread_id, target_thread_id, using=self.using
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        run_for_sync_caller(removal.prune, self.serde, thread_ids, strategy, using=self.using)

    # Async API: the same functions, where the store runs its calls.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await run_in_db_thread(
            reads.latest_or_named, self.serde, config, using=self.using, following=self.following
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        rows = await run_in_db_thread(
            reads.matching, config, filter=filter, before=before, limit=limit, using=self.using
        )
        for batch in reads.batches(rows):
            for found in await run_in_db_thread(
                reads.with_values, self.serde, batch, using=self.using
            ):
                yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await run_in_db_thread(
            writes.put_checkpoint,
            self.serde,
            config,
            checkpoint,
            metadata,
            new_versions,
            using=self.using,
            memory=self.lists,
            following=self.following,
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await run_in_db_thread(
            _put_writes, self.serde, config, writes, task_id, task_path, using=self.using
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await run_in_db_thread(removal.delete_threads, [thread_id], using=self.using)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await run_in_db_thread(removal.delete_runs, self.serde, run_ids, using=self.using)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await run_in_db_thread(
            copies.copy_thread, source_thread_id, target_thread_id, using=self.using
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await run_in_db_thread(removal.prune, self.serde, thread_ids, strategy, using=self.using)


# The module's name, free for the methods' ``writes`` argument.
_put_writes = writes.put_writes
