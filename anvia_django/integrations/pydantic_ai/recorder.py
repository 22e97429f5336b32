"""One Pydantic AI run's side of the store: load, save by the policy, record.

A run's messages are those of the run's history that carry its run id
(Pydantic AI stamps every message a run adds with it). Their turns follow
the store's runtime: turn t is the t-th model response with the tool
results and retry prompts that answer it; the run's first request (the
user prompt) belongs to turn 1.

When the policy saves:

- ``message``: each request just before it is sent to the model (the user
  prompt, then each request of tool results), each response as soon as its
  model request has finished, and at the end whatever the run added after
  its last model request (the result of an output tool);
- ``turn``: turn t once the request answering it is about to be sent, and
  the last turn at the end;
- ``run``: everything once, at the end of a run that succeeded.

A failed run (any ``Exception``) gets an error record holding all its
messages so far (saved or not) and a failed run record; what the policy had
saved stays. A cancelled run (``CancelledError``: a stream closed early, a
timeout) is treated as a killed process: what was saved stays, nothing else
is written. A failing store call never hides the error that failed the run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic_ai.messages import ModelMessage, ModelResponse, repair_messages

from anvia_django.core.memory.errors import ConversationScopeError
from anvia_django.core.memory.run_records import MemoryRunInput, RunStatus, TokenUsage
from anvia_django.core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemoryErrorInput,
    MemorySavePolicy,
    MemoryStore,
)
from anvia_django.integrations.cancellation import to_completion
from anvia_django.integrations.run_tally import model_identifier

from .codec import messages_to_stored, stored_to_messages
from .stored_form import stored_run_id

logger = logging.getLogger("anvia_django.integrations.pydantic_ai")


def with_turns(messages: Sequence[ModelMessage]) -> list[tuple[int, ModelMessage]]:
    """Each of a run's messages (in order) with its turn."""
    responses = 0
    turns = []
    for message in messages:
        if isinstance(message, ModelResponse):
            responses += 1
        turns.append((max(responses, 1), message))
    return turns


class RunRecorder:
    def __init__(self, store: MemoryStore, context: MemoryContext, policy: MemorySavePolicy):
        self.store = store
        self.context = context
        self.policy = policy
        self.run_id = ""
        self.started_at = datetime.now(UTC)
        self.stored_before = False
        """The store already held messages of this run id: a retry, which writes nothing."""
        self.saved = 0
        self._saved: dict[int, ModelMessage] = {}
        self._history: list[ModelMessage] = []
        self._model: str | None = None

    async def start(
        self, run_id: str, history: list[ModelMessage], model: str | None, *, prompted: bool
    ) -> None:
        """Load the session into ``history`` (the run's own list), unless the
        run was given one; find out whether this run id is stored already.

        A run with a new prompt gets the history repaired as Pydantic AI's
        ``repair_messages`` does: tool calls a failed (or paused) run left
        unanswered are closed out, where Pydantic AI would refuse the
        prompt. A run without one (resuming, ``deferred_tool_results``)
        gets the history as stored, its open calls still to be answered.
        """
        self.run_id = run_id
        self._history = history
        self._model = model
        stored = await self.store.load(self.context)
        earlier = [message for message in stored if stored_run_id(message) != run_id]
        self.stored_before = len(earlier) < len(stored)
        if not history:
            history[:0] = repair_messages(
                stored_to_messages(earlier), repair_last_response=prompted
            )

    def follow(self, history: list[ModelMessage]) -> None:
        """``history`` is the run's history now (Pydantic AI may replace the list)."""
        self._history = history

    async def before_request(self, history: list[ModelMessage]) -> None:
        self.follow(history)
        if self.policy == "message":
            await self._save(history)
        elif self.policy == "turn":
            # The request about to be sent answers the newest response: its
            # turn, and every one before it, is complete.
            answered = sum(isinstance(m, ModelResponse) for m in self._own(history))
            await self._save(history, through_turn=answered)

    async def after_step(self, history: list[ModelMessage]) -> None:
        self.follow(history)
        if self.policy == "message":
            await self._save(history)

    async def succeeded(self, history: list[ModelMessage]) -> None:
        await self._save(history)
        await self._record_run("succeeded", history, None)

    async def failed(self, error: Exception) -> None:
        if isinstance(error, ConversationScopeError) or self.stored_before:
            # Another user's conversation refuses every write (a record of
            # it would only be noise); a retry's first attempt is the record.
            return
        record_error = getattr(self.store, "record_error", None)
        if callable(record_error):
            try:
                stored = messages_to_stored(self._own(self._history))
                await to_completion(
                    record_error(MemoryErrorInput(self.context, self.run_id, error, stored))
                )
            except Exception as failure:
                error.add_note(f"record_error also failed: {type(failure).__name__}: {failure}")
                logger.warning("record_error failed for run %s", self.run_id, exc_info=failure)
        await self._record_run("failed", self._history, error)

    def _own(self, history: Sequence[ModelMessage]) -> list[ModelMessage]:
        return [message for message in history if message.run_id == self.run_id]

    async def _save(
        self, history: Sequence[ModelMessage], *, through_turn: int | None = None
    ) -> None:
        if self.stored_before:
            return
        pending = [
            (turn, message)
            for turn, message in with_turns(self._own(history))
            if id(message) not in self._saved and (through_turn is None or turn <= through_turn)
        ]
        if not pending:
            return
        if self.policy == "message":
            batches = [[item] for item in pending]
        elif self.policy == "turn":
            batches = _by_turn(pending)
        else:
            # "run": one append, under the number of the last turn.
            last = pending[-1][0]
            batches = [[(last, message) for _, message in pending]]
        for batch in batches:
            messages = [message for _, message in batch]
            append = MemoryAppendInput(
                self.context, self.run_id, batch[0][0], messages_to_stored(messages)
            )
            await to_completion(self.store.append(append))
            self._saved.update((id(message), message) for message in messages)
            self.saved += len(messages)

    async def _record_run(
        self, status: RunStatus, history: Sequence[ModelMessage], error: Exception | None
    ) -> None:
        record_run = getattr(self.store, "record_run", None)
        if self.stored_before or not callable(record_run):
            return
        responses = [m for m in self._own(history) if isinstance(m, ModelResponse)]
        usage = TokenUsage()
        for response in responses:
            usage += TokenUsage(response.usage.input_tokens, response.usage.output_tokens)
        names = [r.model_name for r in responses if r.model_name]
        finished_at = datetime.now(UTC)
        run = MemoryRunInput(
            context=self.context,
            run_id=self.run_id,
            status=status,
            started_at=min(self.started_at, finished_at),
            finished_at=finished_at,
            model=model_identifier(names[-1] if names else self._model),
            usage=usage if responses else None,
            message_count=self.saved,
        )
        try:
            await to_completion(record_run(run))
        except Exception as failure:
            # Never fails the run: its messages are saved by now, and a
            # caller retrying a succeeded run for its bookkeeping would
            # repeat it.
            if error is not None:
                error.add_note(f"record_run also failed: {type(failure).__name__}: {failure}")
            logger.warning("record_run failed for run %s", self.run_id, exc_info=failure)


def _by_turn(
    pending: list[tuple[int, ModelMessage]],
) -> list[list[tuple[int, ModelMessage]]]:
    batches: list[list[tuple[int, ModelMessage]]] = []
    for item in pending:
        if batches and batches[-1][0][0] == item[0]:
            batches[-1].append(item)
        else:
            batches.append([item])
    return batches
