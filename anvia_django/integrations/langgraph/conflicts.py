"""Two runs of one thread at once: the second to store is refused.

A LangGraph run reads its thread's latest checkpoint, then stores each
super-step as a child of the one before. Two runs that read the same
latest would each store children of it: the thread forks, and the run
that stored last silently hides the other. So a run that follows its
thread's latest stores a checkpoint only while its parent is still the
latest of its thread and namespace; else :class:`ConcurrentRunError`,
and nothing of that checkpoint is stored.

Which runs follow the latest:

- a config from ``get_tuple`` without a ``checkpoint_id`` says so
  (``FOLLOWS_LATEST``: True); LangGraph's loop keeps its keys in every
  config it puts with, and ``put`` returns it on;
- a thread's first run finds no checkpoint, so no config can say so: the
  saver remembers the namespaces it found empty, and a first checkpoint
  stored there, and every checkpoint stored after one it remembers, follow
  the latest too (:class:`Following`, in the process: a run stores from
  the process that runs it);
- a checkpoint asked for by its id (``get_tuple`` with a ``checkpoint_id``,
  a tuple's parent, a listed checkpoint) is forked from on purpose: those
  configs say False, and a put after them is never refused.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache

from django.db import connections
from langgraph.errors import InvalidUpdateError

from anvia_django.persistence.compiled import CompiledQuery, compile_once

from .models import LangGraphCheckpoint
from .places import slot

REMEMBERED = 4096
"""Namespaces and checkpoints a saver remembers (the least recent forgotten)."""


class ConcurrentRunError(InvalidUpdateError):
    """A run read its thread's latest checkpoint, and another run stored a
    checkpoint on that thread before this one could: storing would fork
    the thread without anyone asking. Nothing of the refused checkpoint
    was stored."""

    def __init__(
        self, thread_id: str, checkpoint_ns: str, parent_id: str | None, latest: str | None
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent_id = parent_id
        self.latest = latest
        where = f"thread {thread_id!r}" + (
            f" (namespace {checkpoint_ns!r})" if checkpoint_ns else ""
        )
        now = (
            f"another run stored checkpoint {latest} since"
            if latest is not None
            else "it was deleted since"
        )
        read = (
            f"continues checkpoint {parent_id}, read as the thread's latest"
            if parent_id is not None
            else "found the thread without checkpoints"
        )
        super().__init__(
            f"{where}: this run {read}, but {now}. Nothing was stored. "
            "Run a thread's graph one call at a "
            "time; run it again to continue from the latest checkpoint, or pass "
            "checkpoint_id in the config to branch from an earlier one on purpose."
        )


class Following:
    """What a saver remembers of the runs that follow their thread's latest
    without a config saying so: the namespaces it found empty, and the
    checkpoints it stored for such runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: OrderedDict[tuple[str, str, str | None], None] = OrderedDict()

    def found_empty(self, thread_id: str, checkpoint_ns: str) -> None:
        self._remember((thread_id, checkpoint_ns, None))

    def stored(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> None:
        self._remember((thread_id, checkpoint_ns, checkpoint_id))

    def after(self, thread_id: str, checkpoint_ns: str, parent_id: str | None) -> bool:
        """Whether a checkpoint after ``parent_id`` (None: a first) follows the latest."""
        with self._lock:
            return (thread_id, checkpoint_ns, parent_id) in self._keys

    def _remember(self, key: tuple[str, str, str | None]) -> None:
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > REMEMBERED:
                self._keys.popitem(last=False)


def latest_after_lock(
    alias: str, thread_id: str, checkpoint_ns: str, parent_id: str | None
) -> str | None:
    """The latest checkpoint of a thread and namespace (None: it has none),
    read inside a put's transaction before it stores anything, race-free:
    on PostgreSQL and MariaDB the parent's row is locked first, so puts
    after the same parent wait for each other, and the latest is read after
    the lock (a locking read, past MariaDB's snapshot); SQLite's transaction
    holds the database's write lock from its start (``transaction_mode =
    "IMMEDIATE"``, which the app's system check asks for), and it has no row
    locks to take. The put is refused (:class:`ConcurrentRunError`) unless
    it is ``parent_id``. A namespace found empty has no row to lock: two
    first checkpoints stored at once both pass, and the next put of one of
    the two runs is refused (both cannot be the latest). PostgreSQL's
    one-statement put (``dialects/checkpoints.py``) does the same in SQL."""
    values = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": parent_id}
    if parent_id is not None and connections[alias].features.has_select_for_update:
        _queries(alias)[0].rows(alias, values)
    latest = _queries(alias)[1].column(alias, values)
    return latest[0] if latest else None


@lru_cache(maxsize=16)
def _queries(alias: str) -> tuple[CompiledQuery, CompiledQuery]:
    """Locking the parent's row; the thread's latest checkpoint, a locking
    read. Compiled once (``persistence/compiled.py``), in a transaction
    (``select_for_update`` asks for one)."""
    rows = LangGraphCheckpoint.objects.select_for_update().filter(
        thread_id=slot(LangGraphCheckpoint, "thread_id"),
        checkpoint_ns=slot(LangGraphCheckpoint, "checkpoint_ns"),
    )
    parent = rows.filter(checkpoint_id=slot(LangGraphCheckpoint, "checkpoint_id"))
    latest = rows.order_by("-checkpoint_id").values_list("checkpoint_id")[:1]
    return compile_once(parent.values_list("pk"), alias), compile_once(latest, alias)
