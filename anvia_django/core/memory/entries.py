"""History with positions: what ``rewind`` and ``fork`` take.

``load`` returns messages only; with a load limit or a compaction summary
the first message is not position 0, so a position cannot be counted from
the list (``len(history) - 2`` is wrong as soon as anything was cut off).
A store that can rewind or fork says where each loaded message is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .types import MemoryContext, MemoryStore, Message
from .window import window_start


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message of a loaded history and where it is stored.

    ``position`` is ``None`` for a compaction summary, which stands for
    positions 0 to ``covers_through`` and is stored outside the transcript.
    """

    position: int | None
    message: Message
    covers_through: int | None = None
    """For a summary: the last position it stands for; otherwise ``None``."""

    @property
    def is_summary(self) -> bool:
        return self.position is None


@runtime_checkable
class PositionedMemoryStore(MemoryStore, Protocol):
    """A store that can say where each message it loads is stored."""

    async def load_entries(
        self, context: MemoryContext, *, compacted: bool = False
    ) -> list[HistoryEntry]:
        """What ``load`` (``compacted``: ``load_compacted``) returns, as entries."""
        ...


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A stored message as the windowing below needs it."""

    position: int
    run_id: str
    message: Message


def windowed_entries(
    rows: Sequence[StoredRow],
    limit: int | None,
    summary: HistoryEntry | None = None,
) -> list[HistoryEntry]:
    """The entries ``load`` / ``load_compacted`` give for ``rows`` (the
    messages after ``summary``, in position order, or the newest
    ``limit + 1`` of them at least): the same window, with positions.

    Windowed as :func:`~anvia_django.core.memory.window.window_start` does,
    the summary taking one place of ``limit``.
    """
    head = [summary] if summary is not None else []
    if limit is not None:
        room = limit - len(head)
        if room == 0:
            return head
        rows = rows[-(room + 1) :]
        rows = rows[window_start([row.run_id for row in rows], room) :]
    return [*head, *(HistoryEntry(row.position, row.message) for row in rows)]
