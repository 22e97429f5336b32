"""When a run's messages reach the store: the three save policies.

Every message of a run goes through :meth:`RunRecorder.add`. The policy only
decides when the pending messages are flushed as one ``append``:

- ``message``: on every ``add``, so each message is its own append;
- ``turn``: at the end of each turn (after its tool results) and at the end
  of the final turn;
- ``run``: once, when the run has its final answer.
"""

from __future__ import annotations

from anvia_django.core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemorySavePolicy,
    MemoryStore,
    Message,
)


class RunRecorder:
    def __init__(
        self, store: MemoryStore, context: MemoryContext, run_id: str, policy: MemorySavePolicy
    ) -> None:
        self._store = store
        self._context = context
        self._run_id = run_id
        self._policy = policy
        self._pending: list[Message] = []
        self.messages: list[Message] = []
        """Every message of the run so far, saved or not."""
        self.saved = 0
        """How many of them the store has accepted."""

    def note(self, message: Message) -> None:
        """Count ``message`` as part of the run without saving it yet."""
        self.messages.append(message)
        self._pending.append(message)

    async def add(self, turn: int, message: Message) -> None:
        self.note(message)
        if self._policy == "message":
            await self._flush(turn)

    async def end_turn(self, turn: int) -> None:
        if self._policy == "turn":
            await self._flush(turn)

    async def finish(self, turn: int) -> None:
        # "message" has nothing pending by now; "turn" saves the final turn;
        # "run" saves everything, under the number of the last turn.
        await self._flush(turn)

    async def _flush(self, turn: int) -> None:
        if not self._pending:
            return
        batch = list(self._pending)
        await self._store.append(MemoryAppendInput(self._context, self._run_id, turn, batch))
        self.saved += len(batch)
        # Cleared only once stored: a failed append leaves the run failed, and
        # the pending messages still count in what record_error receives.
        self._pending.clear()
