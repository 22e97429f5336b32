"""An OpenAI Agents SDK ``Session`` stored in the Django database.

    from agents import Agent, Runner
    from anvia_django.integrations.openai_agents import DjangoSession

    session = DjangoSession("thread_123", user_id="user_456")
    result = await Runner.run(agent, "Hi", session=session)

Each item becomes one stored message. Items with a non-empty string
``"role"`` (user, assistant, system and developer messages) are stored
unchanged, so the admin and the inspector show them like any other message.
Items without one (``function_call``, ``function_call_output``, ``reasoning``,
...) are stored as ``{"role": <the item's "type">, "openai_agents_item": item}``
and unwrapped on the way out: what goes in comes out equal.

Each ``add_items`` call is one atomic append with run id
``"openai-agents-<hex>"`` and turn 1 (see :mod:`anvia_django.integrations.batches`).
``session_settings`` is read with the SDK's own coercion, so it accepts and
refuses exactly what ``SQLiteSession`` does, and defaults to ``SessionSettings()``.
A cancelled ``add_items`` / ``pop_item`` / ``clear_session`` returns only once
its write has committed or rolled back (:mod:`anvia_django.integrations.cancellation`).

Run records: the SDK tells a session nothing about the run it serves, so the
caller hands the finished run over::

    try:
        result = await Runner.run(agent, "Hi", session=session)
    except AgentsException as error:
        await session.record_run(error)
        raise
    await session.record_run(result)
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.run_records import MemoryRunInput, TokenUsage
from anvia_django.core.memory.types import JsonObject, MemoryContext, MemoryErrorInput, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.persistence import (
    clear_conversation,
    load_latest_messages,
    load_messages,
    pop_last_message,
)
from anvia_django.persistence.scope import scope_key
from anvia_django.persistence.threads.dispatch import run_in_db_thread

from .batches import append_batch
from .cancellation import write_to_completion
from .run_tally import RunTally, model_identifier, record_outcome, run_input

if TYPE_CHECKING:
    from agents.agent import Agent
    from agents.exceptions import RunErrorDetails
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.result import RunResultBase
    from agents.usage import Usage

SOURCE = "openai-agents"
ITEM_KEY = "openai_agents_item"
"""The key that holds an item which could not be stored as a message itself."""

FALLBACK_ROLE = "item"


def item_to_message(item: TResponseInputItem, path: str = "item") -> Message:
    """The stored form of an Agents SDK input item."""
    if not isinstance(item, dict):
        raise InvalidMemoryInputError(
            f"must be a dict (a TResponseInputItem), not {type(item).__name__}", path=path
        )
    fields = cast(dict[str, Any], item)
    role = fields.get("role")
    if isinstance(role, str) and role.strip() and ITEM_KEY not in fields:
        return dict(fields)
    kind = fields.get("type")
    label = kind if isinstance(kind, str) and kind.strip() and len(kind) <= 64 else FALLBACK_ROLE
    return {"role": label, ITEM_KEY: fields}


def message_to_item(message: Message) -> TResponseInputItem:
    """The input item a stored message was made from."""
    # Unwrapped items never contain ITEM_KEY (item_to_message wraps those).
    return cast("TResponseInputItem", message.get(ITEM_KEY, message))


class DjangoSession:
    """Conversation history for ``Runner.run(..., session=...)``, in Django models.

    Implements the SDK's ``Session`` protocol. The conversation is the one
    ``ANVIA_DJANGO["SCOPE"]`` names: by default ``session_id`` and ``user_id``
    together, plus any metadata keys it lists (tenants), taken from
    ``metadata``, which is also stored on the conversation. ``using`` picks a database
    alias; ``session_settings.limit`` is the default for :meth:`get_items`.
    ``session_settings`` may be a ``SessionSettings`` or a dict of its fields;
    unknown fields raise ``TypeError`` and ill-typed values pydantic's
    ``ValidationError`` (a ``ValueError``), as in the SDK's own sessions. A
    negative limit raises ``InvalidMemoryInputError``.
    """

    session_id: str
    # Declared as in the SDK's Session protocol (a mutable attribute must match
    # exactly); __init__ always sets a SessionSettings.
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        metadata: JsonObject | None = None,
        using: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        context = MemoryContext(session_id, user_id=user_id, metadata=metadata)
        validate_context(context, app_settings.input_limits)
        scope_key(context)  # a missing tenant key is refused here, not at first use
        self.session_id = session_id
        self.user_id = user_id
        self.using = using
        self.session_settings = _coerce_settings(session_settings)
        self._context = context
        self._tally = RunTally()
        self._recorded: MemoryRunInput | None = None

    def __repr__(self) -> str:
        return (
            f"DjangoSession(session_id={self.session_id!r}, user_id={self.user_id!r}, "
            f"using={self.using!r})"
        )

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history in order; only the newest ``limit`` items when given
        (else ``session_settings.limit``). ``limit=0`` gives ``[]``."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        self._tally.touched()
        messages = await run_in_db_thread(self._load, limit, using=self.using)
        return [message_to_item(message) for message in messages]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one transaction: all of them or none."""
        messages = [item_to_message(item, f"items[{i}]") for i, item in enumerate(items)]
        if messages:
            await write_to_completion(
                append_batch, self._context, SOURCE, messages, using=self.using
            )
            self._tally.add_saved(len(messages))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` when the session is empty."""
        message = await write_to_completion(pop_last_message, self._context, using=self.using)
        return None if message is None else message_to_item(message)

    async def clear_session(self) -> None:
        """Delete the session's conversation and everything in it."""
        await write_to_completion(clear_conversation, self._context, using=self.using)

    async def record_run(
        self,
        outcome: RunResultBase | Exception,
        *,
        run_id: str | None = None,
        model: str | None = None,
        started_at: datetime | None = None,
    ) -> str:
        """Record the run that just used this session; return its run id.

        ``outcome`` is the run's ``RunResult`` / ``RunResultStreaming`` (a
        succeeded run; stream it to its end first) or the exception it raised
        (a failed run, recorded with an error record holding the items an
        ``AgentsException`` says it produced). The record holds the token
        usage the SDK summed in ``context_wrapper.usage`` (none when no
        model request was made), the model name when the last agent's model names one (else
        pass ``model``), the items this session saved since its previous
        recorded run, and as start the first read or write since then
        (or ``started_at``). Retrying with the returned ``run_id`` writes
        nothing new: the run recorded last is written again as it was (and
        ``persistence.record_run`` finds it stored).
        """
        if self._recorded is not None and run_id == self._recorded.run_id:
            await write_to_completion(record_outcome, self._recorded, None, using=self.using)
            return run_id
        failed = isinstance(outcome, Exception)
        if isinstance(outcome, Exception):
            # The SDK attaches what the run had done to its AgentsExceptions.
            details: RunErrorDetails | None = getattr(outcome, "run_data", None)
            usage = None if details is None else details.context_wrapper.usage
            agent = None if details is None else details.last_agent
        else:
            usage, agent, details = outcome.context_wrapper.usage, outcome.last_agent, None
        if run_id is None:
            run_id = f"{SOURCE}-run-{uuid.uuid4().hex}"
        run = run_input(
            self._context,
            run_id,
            "failed" if failed else "succeeded",
            started_at=started_at or self._tally.started_at,
            model=model or _model_name(agent),
            usage=_token_usage(usage),
            message_count=self._tally.saved,
        )
        error = None
        if isinstance(outcome, Exception):
            produced = [] if details is None else details.new_items
            items = [item_to_message(item.to_input_item()) for item in produced]
            error = MemoryErrorInput(self._context, run_id, outcome, items)
        await write_to_completion(record_outcome, run, error, using=self.using)
        self._tally.reset()
        self._recorded = run
        return run_id

    def _load(self, limit: int | None, *, using: str | None) -> list[Message]:
        if limit is None:
            return load_messages(self._context, using=using)
        return load_latest_messages(self._context, limit, using=using)


def _token_usage(usage: Usage | None) -> TokenUsage | None:
    # A Usage without requests is the SDK's empty default, not a report of 0.
    if usage is None or usage.requests == 0:
        return None
    return TokenUsage(usage.input_tokens, usage.output_tokens, usage.total_tokens)


def _model_name(agent: Agent[Any] | None) -> str | None:
    """The agent's model name: its ``model`` string, or the ``model``
    attribute of the SDK's OpenAI model classes. ``None`` when the agent
    leaves the model to the run config, which a result does not keep."""
    model = None if agent is None else agent.model
    return model_identifier(model if isinstance(model, str) else getattr(model, "model", None))


def _coerce_settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings:
    """``value`` as the SDK's sessions read it, plus our refusal of negative limits
    (the SDK's SQLite session would read "no limit", its others differ)."""
    from agents.memory.session_settings import SessionSettings, coerce_session_settings

    settings = SessionSettings() if value is None else coerce_session_settings(value)
    if settings.limit is not None and settings.limit < 0:
        raise InvalidMemoryInputError(
            "must be None or a non-negative integer", path="session_settings.limit"
        )
    return settings
