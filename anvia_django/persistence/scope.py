"""The conversation a context names (its session id and scope key), and the
owner check for scopes that leave the user id out."""

from __future__ import annotations

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import ConversationScopeError
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext
from anvia_django.models import Conversation


def scope_key(context: MemoryContext, scope: ConversationScope | None = None) -> str:
    """``context``'s scope key under ``scope`` (the ``SCOPE`` setting when
    ``None``); raises ``InvalidMemoryInputError`` before anything is read
    or written when the context lacks what the scope needs."""
    return (scope if scope is not None else app_settings.scope).key(context)


def lookup(context: MemoryContext, scope: ConversationScope | None = None) -> dict[str, str]:
    """The conversation filter of ``context``: unique by the constraint."""
    return {"session_id": context.session_id, "scope_key": scope_key(context, scope)}


def check_scope(owner_user_id: str | None, context_user_id: str | None) -> None:
    """A conversation belongs to the user it was created with.

    A context without a user id is trusted server code and may touch any
    conversation its scope key names; a context naming another user may
    touch none. Where the user id is part of the scope key, the conversation
    found is the user's own and this always passes.
    """
    if context_user_id and owner_user_id != context_user_id:
        raise ConversationScopeError(
            "This conversation belongs to another user; nothing was read or written."
        )


def find_conversation_id(
    alias: str, context: MemoryContext, scope: ConversationScope | None = None
) -> int | None:
    """The id of ``context``'s conversation, ``None`` if it has none; raises
    ``ConversationScopeError`` when it belongs to another user. Not locked."""
    found = (
        Conversation.objects.using(alias)
        .filter(**lookup(context, scope))
        .values_list("pk", "user_id")
        .first()
    )
    if found is None:
        return None
    conversation_id, owner = found
    check_scope(owner, context.user_id)
    return int(conversation_id)
