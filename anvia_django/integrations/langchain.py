"""A LangChain ``BaseChatMessageHistory`` stored in the Django database.

    from anvia_django.integrations.langchain import DjangoChatMessageHistory

    history = DjangoChatMessageHistory("thread_123", user_id="user_456")
    history.add_messages([HumanMessage("Hi"), AIMessage("Hello!")])
    await history.aget_messages()

Each ``BaseMessage`` becomes one stored message in the OpenAI-like shape the
admin and the inspector show::

    {"role": "user", "content": "Hi", "langchain": {"type": "human", "data": {...}}}

``"langchain"`` holds the rest of ``message_to_dict(message)`` (ids, tool
calls, metadata, ...), so ``messages_from_dict`` rebuilds a message equal to
the one stored. Messages without that key (written by another agent runtime
into the same session) are read with LangChain's ``convert_to_messages``.

Each ``add_messages`` call is one atomic append with run id
``"langchain-<hex>"`` and turn 1 (see :mod:`anvia_django.integrations.batches`).
``messages`` can be read from sync and async code alike (inside a running event
loop it reads in a fresh thread, see :mod:`anvia_django.integrations.sync_reads`);
to write from async code use the ``a``-prefixed methods.

Run records: a batch holding an ``AIMessage`` is one run of a chain (as
``RunnableWithMessageHistory`` writes each invocation's input and output in
one call), so it is written together with a run record whose run id is the
batch's: the token usage summed from the AI messages' ``usage_metadata``, the
model name from their ``response_metadata`` (``model_name`` or ``model``),
the batch's message count, and as start this history's first read since its
last recorded run (``RunnableWithMessageHistory`` reads the history when the
invocation starts). ``record_runs=False`` turns this off.

Per-user conversation ids (``RunnableWithMessageHistory`` with
``history_factory_config``): the default scope keeps each user's
conversation "1" apart, so the plain constructor serves::

    RunnableWithMessageHistory(
        chain,
        lambda user_id, conversation_id: DjangoChatMessageHistory(
            conversation_id, user_id=user_id
        ),
        history_factory_config=user_conversation_fields(),
    )
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import SynchronousOnlyOperation
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables.utils import ConfigurableFieldSpec

from anvia_django.conf import ID_MAX_LENGTH, app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.run_records import TokenUsage
from anvia_django.core.memory.types import (
    JsonObject,
    MemoryAppendInput,
    MemoryContext,
    Message,
)
from anvia_django.core.memory.validation import validate_context
from anvia_django.persistence import clear_conversation, load_messages
from anvia_django.persistence.scope import scope_key
from anvia_django.persistence.threads.dispatch import run_in_db_thread

from .batches import BATCH_TURN, append_batch, new_batch_id
from .cancellation import write_to_completion
from .run_tally import RunTally, append_and_record, model_identifier, run_input
from .sync_reads import in_event_loop_thread, read_off_the_loop

SOURCE = "langchain"
LANGCHAIN_KEY = "langchain"

ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "FunctionMessageChunk": "function",
}
"""LangChain message types and the roles they are stored (and shown) with."""


def message_to_stored(message: BaseMessage, path: str = "message") -> Message:
    """The stored form of a LangChain message."""
    if not isinstance(message, BaseMessage):
        raise InvalidMemoryInputError(
            f"must be a BaseMessage, not {type(message).__name__}", path=path
        )
    record = message_to_dict(message)
    kind: str = record["type"]
    data: dict[str, Any] = dict(record["data"])
    content = data.pop("content")
    return {
        "role": _role(kind, data),
        "content": content,
        LANGCHAIN_KEY: {"type": kind, "data": data},
    }


def stored_to_message(stored: Message) -> BaseMessage:
    """The LangChain message a stored message was made from."""
    record = stored.get(LANGCHAIN_KEY)
    if not isinstance(record, dict):
        return convert_to_messages([stored])[0]
    data = {**record["data"], "content": stored.get("content")}
    return messages_from_dict([{"type": record["type"], "data": data}])[0]


def _role(kind: str, data: dict[str, Any]) -> str:
    if kind in ROLES:
        return ROLES[kind]
    # ChatMessage carries its own role.
    role = data.get("role")
    if isinstance(role, str) and role.strip() and len(role) <= ID_MAX_LENGTH:
        return role
    return kind


class DjangoChatMessageHistory(BaseChatMessageHistory):
    """Chat history for ``RunnableWithMessageHistory`` and friends, in Django models.

    The conversation is the one ``ANVIA_DJANGO["SCOPE"]`` names: by default
    the session id and ``user_id`` together, plus any metadata keys it lists
    (tenants), taken from ``metadata``, which is also stored on the
    conversation. ``using`` picks a database alias; ``record_runs`` keeps a
    run record for each batch that holds an AI message.
    """

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        metadata: JsonObject | None = None,
        using: str | None = None,
        record_runs: bool = True,
    ) -> None:
        super().__init__()
        context = MemoryContext(session_id, user_id=user_id, metadata=metadata)
        validate_context(context, app_settings.input_limits)
        scope_key(context)  # a missing tenant key is refused here, not at first use
        self.session_id = session_id
        self.user_id = user_id
        self.using = using
        self.record_runs = record_runs
        self._context = context
        self._tally = RunTally()

    def __repr__(self) -> str:
        return (
            f"DjangoChatMessageHistory(session_id={self.session_id!r}, "
            f"user_id={self.user_id!r}, using={self.using!r})"
        )

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The history, oldest first. Readable inside async code too (in a
        fresh thread, which sees committed data only); ``aget_messages``
        does not block the event loop."""
        self._tally.touched()
        stored = read_off_the_loop(load_messages, self._context, using=self.using)
        return [stored_to_message(m) for m in stored]

    async def aget_messages(self) -> list[BaseMessage]:
        self._tally.touched()
        stored = await run_in_db_thread(load_messages, self._context, using=self.using)
        return [stored_to_message(m) for m in stored]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one transaction: all of them or none."""
        _refuse_sync_write_in_async_code("add_messages", "aadd_messages")
        stored = self._to_stored(messages)
        if stored:
            self._write(messages, stored, using=self.using)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        stored = self._to_stored(messages)
        if stored:
            await write_to_completion(self._write, messages, stored, using=self.using)

    def clear(self) -> None:
        """Delete the session's conversation and everything in it."""
        _refuse_sync_write_in_async_code("clear", "aclear")
        clear_conversation(self._context, using=self.using)

    async def aclear(self) -> None:
        await write_to_completion(clear_conversation, self._context, using=self.using)

    def _write(
        self, messages: Sequence[BaseMessage], stored: list[Message], *, using: str | None
    ) -> None:
        answers = [m for m in messages if isinstance(m, AIMessage)]
        if not (self.record_runs and answers):
            append_batch(self._context, SOURCE, stored, using=using)
            return
        batch_id = new_batch_id(SOURCE)
        append = MemoryAppendInput(self._context, batch_id, BATCH_TURN, stored)
        run = run_input(
            self._context,
            batch_id,
            "succeeded",
            started_at=self._tally.started_at,
            model=_model_name(answers),
            usage=_token_usage(answers),
            message_count=len(stored),
        )
        append_and_record(append, run, using=using)
        self._tally.reset()

    @staticmethod
    def _to_stored(messages: Sequence[BaseMessage]) -> list[Message]:
        return [message_to_stored(m, f"messages[{i}]") for i, m in enumerate(messages)]


def _token_usage(answers: list[AIMessage]) -> TokenUsage:
    total = TokenUsage()
    for answer in answers:
        usage = answer.usage_metadata
        if usage is not None:
            total += TokenUsage(
                usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens")
            )
    return total


def _model_name(answers: list[AIMessage]) -> str | None:
    """The newest answer's model name, under the keys chat models use for it."""
    for answer in reversed(answers):
        metadata = answer.response_metadata
        name = model_identifier(metadata.get("model_name") or metadata.get("model"))
        if name is not None:
            return name
    return None


def _refuse_sync_write_in_async_code(method: str, async_method: str) -> None:
    # Django would refuse too, less helpfully; offloop explains why writes
    # are not moved to another thread as reads are.
    if in_event_loop_thread():
        raise SynchronousOnlyOperation(
            f"DjangoChatMessageHistory.{method}() writes to the database and cannot run "
            f"inside an event loop; use 'await history.{async_method}(...)'."
        )


def user_conversation_fields() -> list[ConfigurableFieldSpec]:
    """``history_factory_config`` for a ``get_session_history(user_id,
    conversation_id)``: callers pass ``{"configurable": {"user_id": ...,
    "conversation_id": ...}}``."""
    return [
        ConfigurableFieldSpec(
            id="user_id",
            annotation=str,
            name="User ID",
            description="The user who owns the conversation.",
            is_shared=True,
        ),
        ConfigurableFieldSpec(
            id="conversation_id",
            annotation=str,
            name="Conversation ID",
            description="The conversation, unique among the user's conversations.",
            is_shared=True,
        ),
    ]
