"""A session: one conversation of an agent, identified by its session id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.core.memory.entries import HistoryEntry
from anvia_django.core.memory.errors import MemoryCapabilityError
from anvia_django.core.memory.types import JsonObject, MemoryContext, MemoryStore, Message

from .compaction import load_history
from .run import AgentResponse, execute_run

if TYPE_CHECKING:
    from .agent import Agent


@dataclass(frozen=True, slots=True)
class AgentSession:
    """Prompts sent here share one durable history in the agent's store."""

    agent: Agent
    context: MemoryContext

    @property
    def _store(self) -> MemoryStore:
        assert self.agent.memory is not None  # Agent.session() guarantees it
        return self.agent.memory.store

    def prompt(self, text: str) -> Prompt:
        if not isinstance(text, str):
            raise TypeError(f"A prompt is a string, not {type(text).__name__}.")
        return Prompt(self, text)

    async def history(self) -> list[Message]:
        """The session's stored messages, as the store's ``load`` returns them;
        for an agent with compaction, what it loads: the newest summary, then
        the messages after it."""
        return await load_history(self.agent.compaction, self._store, self.context)

    async def history_entries(self) -> list[HistoryEntry]:
        """:meth:`history`, each message with its stored position: the
        positions :meth:`rewind` and :meth:`fork` take.

        Count positions from here, never from ``len(history())``: with
        compaction the history starts with a summary (an entry whose
        ``position`` is ``None``) standing for many messages, and with a
        store's load limit it starts after the oldest ones.
        """
        load_entries = getattr(self._store, "load_entries", None)
        if not callable(load_entries):
            raise MemoryCapabilityError(
                f"{type(self._store).__name__} cannot tell positions (it has no load_entries())."
            )
        entries: list[HistoryEntry] = await load_entries(
            self.context, compacted=self.agent.compaction is not None
        )
        return entries

    async def clear(self) -> None:
        """Delete the session's history (and failed runs) from the store."""
        await self._store.clear(self.context)

    async def rewind(self, to_position: int) -> int:
        """Remove the stored messages from ``to_position`` (0-based) onwards;
        return how many were removed.

        For "edit and regenerate": rewind to the edited user message's
        position (from :meth:`history_entries`), then send the edited text
        as a new prompt.
        """
        rewind = getattr(self._store, "rewind", None)
        if not callable(rewind):
            raise MemoryCapabilityError(
                f"{type(self._store).__name__} cannot rewind a conversation (it has no rewind())."
            )
        removed: int = await rewind(self.context, to_position)
        return removed

    async def fork(
        self,
        session_id: str,
        *,
        up_to: int,
        user_id: str | None = None,
        metadata: JsonObject | None = None,
        cross_scope: bool = False,
    ) -> AgentSession:
        """Copy the first ``up_to`` stored messages into a new session, and return it.

        The original stays as it is, so a fork keeps both branches. The new
        session belongs to this session's user; ``user_id`` may name another
        only when this session has none (trusted server code). It keeps this
        session's metadata unless ``metadata`` replaces it, and its tenant:
        metadata naming another is refused unless ``cross_scope`` is true.
        """
        fork = getattr(self._store, "fork", None)
        if not callable(fork):
            raise MemoryCapabilityError(
                f"{type(self._store).__name__} cannot fork a conversation (it has no fork())."
            )
        await fork(MemoryForkInput(self.context, session_id, up_to, user_id, metadata, cross_scope))
        owner = user_id if user_id is not None else self.context.user_id
        # The fork's context carries the metadata it was stored with: under a
        # tenant scope, the tenant it needs to be found again.
        kept = metadata if metadata is not None else self.context.metadata
        return self.agent.session(session_id, user_id=owner, metadata=kept)


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt ready to be sent; nothing runs until :meth:`send`."""

    session: AgentSession
    text: str

    async def send(self) -> AgentResponse:
        """Run the agent on this prompt; raises whatever made the run fail."""
        return await execute_run(self.session.agent, self.session.context, self.text)
