from __future__ import annotations

from anvia_django.core.memory.errors import ConversationScopeError


def check_scope(owner_user_id: str | None, context_user_id: str | None) -> None:
    """A conversation belongs to the user it was created with.

    A context without a user id is trusted server code and may touch any
    conversation; a context naming another user may touch none.
    """
    if context_user_id and owner_user_id != context_user_id:
        raise ConversationScopeError(
            "This conversation belongs to another user; nothing was read or written."
        )
