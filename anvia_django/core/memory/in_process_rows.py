"""The in-process store's rows: what ``InProcessMemoryStore`` keeps per conversation."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime

from .run_records import RunRecord
from .types import FailedRunRecord

SERIALS: itertools.count[int] = itertools.count()


@dataclass(frozen=True, slots=True)
class Row:
    run_id: str
    turn: int
    created_at: datetime
    encoded: str
    """The message as compact JSON: every read decodes a fresh copy."""
    serial: int = field(default_factory=lambda: next(SERIALS))
    """Unique per stored row, so a compaction can tell a rewound-and-refilled
    position from the one it planned on."""


@dataclass(frozen=True, slots=True)
class StoredSummary:
    covers_through: int
    encoded: str
    created_at: datetime


@dataclass(slots=True)
class StoredConversation:
    ref: str
    session_id: str
    user_id: str | None
    metadata: str | None
    created_at: datetime
    updated_at: datetime
    sequence: int
    """Creation order, which breaks ties between equal ``updated_at``."""
    rows: list[Row] = field(default_factory=list)
    failed_runs: list[FailedRunRecord] = field(default_factory=list)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    summaries: list[StoredSummary] = field(default_factory=list)
    """Oldest first; the last one is what ``load`` shows."""
    forked_from: tuple[str, int] | None = None
    """The source's ref and how many of its messages were copied."""
