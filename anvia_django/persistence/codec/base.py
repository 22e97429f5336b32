"""What every query asks of the values it stores and reads (messages, a
failed run's payload, summaries): the codec of their database.

Two implementations: :class:`~.plain.PlainCodec` stores values as given,
:class:`~.sealed.SealedCodec` seals them (encryption at rest). A query
never asks whether encryption is on; it asks its codec.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from anvia_django.core.memory.bounded_records import RecordLimit
from anvia_django.core.memory.errors import ErrorDescription
from anvia_django.core.memory.search_text import SearchTerms

Owner = tuple[str | None, str, str]
"""A conversation's user id, ref and scope key: what chooses its data key
(``encryption.keys.owner_of``)."""

CheckpointValue = tuple[str, bytes | None]
"""A LangGraph checkpoint value as its serializer typed it: ``(type, bytes)``."""
CheckpointSealer = Callable[[str, CheckpointValue], CheckpointValue]
"""How a write stores a checkpoint value at its place."""


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Whose messages a search covers, the narrowest given first: one
    conversation, one user's, the conversations of a queryset (a tenant's,
    the admin's filtered list), or, with none, every owner's. A keyed
    index computes its tokens under the keys of those owners only."""

    conversation_id: int | None = None
    user_id: str | None = None
    conversations: QuerySet[Any, Any] | None = None


@dataclass(frozen=True, slots=True)
class StatePlace:
    """Which ADK state a column holds: an app's (``app_scope`` alone), a
    user's in the app (with ``user_id`` and ``scope_key``, that of their
    sessions there), or a session's (with its ``conversation_id``, and
    ``user_id``, ``ref`` and ``scope_key``: its conversation's owner). A
    sealed state is bound to its place and sealed under its owner's data
    key; an app's under a key of the app's own."""

    app_scope: str
    user_id: str | None = None
    scope_key: str = ""
    conversation_id: int | None = None
    ref: str = ""

    @property
    def owner(self) -> Owner | None:
        """The data key's owner; ``None`` for the app's own key."""
        if self.conversation_id is None and not self.user_id:
            return None
        return (self.user_id, self.ref, self.scope_key)

    @property
    def name(self) -> str:
        """The place in the associated data: what a state copied elsewhere fails to match."""
        if self.conversation_id is not None:
            return f"adk-state\x00session\x00{self.conversation_id}"
        if self.user_id is not None:
            return f"adk-state\x00user\x00{self.app_scope}\x00{self.user_id}"
        return f"adk-state\x00app\x00{self.app_scope}"


class Codec(ABC):
    opens: bool
    """Whether stored values must be opened, each with its place (the
    conversation and position of a message): reads that fetch a value
    select its place with it."""

    compares_in_sql: bool
    """Whether messages are stored as their JSON text, so that the database
    can compare a retried append's tail itself (PostgreSQL's append function)."""

    cannot_open: tuple[type[Exception], ...]
    """What opening a stored value raises when it does not open (tampered,
    under a key that is gone): the inspector shows such a row as
    unreadable and goes on with the others; the store's loads raise it."""

    # Messages.

    @abstractmethod
    def seal_messages(
        self, owner: Owner, conversation_id: int, first: int, texts: list[str]
    ) -> list[str]:
        """The column texts of ``texts`` (JSON) stored from position ``first`` on."""

    def is_sealed(self, text: str) -> bool:
        """Whether a column's text (or only its start) holds a sealed value,
        which opens only whole (a list previews it from the whole text)."""
        return False

    @abstractmethod
    def open_text(self, conversation_id: int, position: int, text: str) -> str:
        """The JSON text of the message whose column holds ``text``."""

    @abstractmethod
    def open_message(self, conversation_id: int, position: int, value: Any) -> Any:
        """The message whose column, decoded, is ``value``."""

    @abstractmethod
    def open_texts(self, rows: Iterable[tuple[int, int, str]]) -> list[Any]:
        """The messages of ``(conversation id, position, column text)`` rows."""

    def open_rows(
        self, conversation_id: int, rows: Iterable[Sequence[Any]], *, position: int, message: int
    ) -> list[Any]:
        """``rows`` (tuples) with their column ``message`` opened, each at
        its column ``position`` of ``conversation_id``."""
        opened = []
        for row in rows:
            values = list(row)
            values[message] = self.open_message(conversation_id, values[position], values[message])
            opened.append(tuple(values))
        return opened

    @abstractmethod
    def copier(self, source_id: int, owner: Owner, fork_id: int) -> Callable[[int, Any], Any]:
        """How a fork (of ``owner``) stores its copy of the source's message
        at a position, given the source's decoded column value."""

    # Records kept beside the transcript.

    @abstractmethod
    def failed_run_columns(
        self,
        owner: Owner,
        conversation_id: int,
        run_id: str,
        error: ErrorDescription,
        encoded: list[str],
        limit: RecordLimit,
    ) -> dict[str, Any]:
        """A failed run's ``error_message``, ``traceback`` and ``messages``
        columns, in the database's ``limit`` (the caller has bounded the
        record's text to ``limit.bytes`` already)."""

    @abstractmethod
    def open_failed_run(
        self, conversation_id: int, run_id: str, error_message: str, traceback: str, messages: Any
    ) -> tuple[str, str, Any]:
        """A failed run's error message, traceback and partial messages."""

    @abstractmethod
    def summary_value(
        self, owner: Owner, conversation_id: int, covers_through: int, message: Any
    ) -> Any:
        """What a summary's ``message`` column stores."""

    @abstractmethod
    def open_summary(self, conversation_id: int, covers_through: int, message: Any) -> Any:
        """A summary's message."""

    @abstractmethod
    def state_value(self, place: StatePlace, state: dict[str, Any]) -> Any:
        """What an ADK state column at ``place`` stores for ``state``."""

    @abstractmethod
    def open_state(self, place: StatePlace, value: Any) -> dict[str, Any]:
        """The ADK state whose column at ``place``, decoded, is ``value``."""

    # Everything else that depends on it.

    @abstractmethod
    def value_to_save(self, instance: Any, value: Any) -> Any:
        """What a message or summary saved through the ORM stores."""

    @abstractmethod
    def search_terms(self, terms: SearchTerms, scope: SearchScope) -> SearchTerms:
        """What the full-text index holds for ``terms`` in the messages ``scope`` covers."""

    @abstractmethod
    def forget_deleted(self, owners: list[Owner]) -> None:
        """Conversations of ``owners`` are being deleted (in the current
        transaction): what they alone needed goes once it commits."""

    @abstractmethod
    def erase_user(self, user_id: str, scope_keys: Collection[str] | None = None) -> int:
        """Make everything stored for ``user_id`` unreadable for good, before
        their rows are deleted; how many keys that destroyed. With
        ``scope_keys``, only what is theirs in those scopes (one tenant's),
        never what their other scopes need."""

    @abstractmethod
    def shares_a_key_across_scopes(self, user_id: str) -> bool:
        """Whether something of ``user_id``'s is sealed under one key for
        all their scopes (made before keys were per scope), which erasing
        one scope leaves readable."""

    # LangGraph's checkpoints (integrations/langgraph/).

    @abstractmethod
    def checkpoint_sealer(self, thread_id: str) -> CheckpointSealer:
        """How one write to ``thread_id``'s checkpoints stores each of its
        values at its place (``encryption.checkpoints.blob_place``,
        ``write_place``): the data key is fetched once per write."""

    @abstractmethod
    def store_sealer(self, namespace: str) -> CheckpointSealer:
        """The same for a write of items to a LangGraph store ``namespace``
        (its labels joined), under the namespace's key."""

    @abstractmethod
    def open_checkpoint_value(
        self, thread_id: str, place: str, value: CheckpointValue
    ) -> CheckpointValue:
        """A stored checkpoint value of ``thread_id`` at ``place`` (or a
        store item of namespace ``thread_id``), opened."""

    @abstractmethod
    def forget_checkpoint_threads(self, thread_ids: Collection[str]) -> None:
        """The checkpoints of ``thread_ids`` are being deleted (in the
        current transaction): their keys go once it commits."""

    @abstractmethod
    def forget_store_namespaces(self, namespaces: Collection[str]) -> None:
        """The last items of store ``namespaces`` are being deleted (in the
        current transaction): their keys go once it commits."""

    @abstractmethod
    def erase_checkpoint_keys(
        self, thread_ids: Collection[str], namespaces: Collection[str]
    ) -> int:
        """Make the values of LangGraph threads ``thread_ids`` and the items
        of store ``namespaces`` unreadable for good now, before their rows
        are deleted (erasure): how many keys that destroyed."""
