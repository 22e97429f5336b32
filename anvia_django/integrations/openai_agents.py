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
its write has committed or rolled back (:mod:`anvia_django.integrations.settle`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from asgiref.sync import sync_to_async

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import JsonObject, MemoryContext, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.persistence import (
    clear_conversation,
    load_latest_messages,
    load_messages,
    pop_last_message,
)

from .batches import append_batch
from .settle import write_to_completion

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

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

    Implements the SDK's ``Session`` protocol. ``user_id`` scopes the session
    to its owner (another user's session raises ``ConversationScopeError``);
    ``metadata`` is stored on the conversation; ``using`` picks a database
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
        self.session_id = session_id
        self.user_id = user_id
        self.using = using
        self.session_settings = _coerce_settings(session_settings)
        self._context = context

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
        messages = await sync_to_async(self._load)(limit)
        return [message_to_item(message) for message in messages]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one transaction: all of them or none."""
        messages = [item_to_message(item, f"items[{i}]") for i, item in enumerate(items)]
        if messages:
            await write_to_completion(
                append_batch, self._context, SOURCE, messages, using=self.using
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` when the session is empty."""
        message = await write_to_completion(pop_last_message, self._context, using=self.using)
        return None if message is None else message_to_item(message)

    async def clear_session(self) -> None:
        """Delete the session's conversation and everything in it."""
        await write_to_completion(clear_conversation, self._context, using=self.using)

    def _load(self, limit: int | None) -> list[Message]:
        if limit is None:
            return load_messages(self._context, using=self.using)
        return load_latest_messages(self._context, limit, using=self.using)


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
