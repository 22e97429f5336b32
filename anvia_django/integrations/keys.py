"""Session ids for frameworks that key a history by (user, conversation).

A stored conversation is found by its ``session_id`` alone, and another
user's session id raises ``ConversationScopeError``. Frameworks such as
LangChain's ``RunnableWithMessageHistory`` instead let every user number
their conversations from ``"1"``. :func:`user_conversation_session_id` gives
each pair its own session id, and distinct pairs never share one.
"""

from __future__ import annotations

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.validation import validate_identifier


def user_conversation_session_id(user_id: str, conversation_id: str) -> str:
    """``"u<len>:<user_id>/<conversation_id>"``: readable in the admin, and
    the length prefix makes it unambiguous whatever either part contains
    (``("a/b", "c")`` and ``("a", "b/c")`` differ)."""
    limits = app_settings.input_limits
    validate_identifier(user_id, "user_id", limits, optional=False)
    validate_identifier(conversation_id, "conversation_id", limits, optional=False)
    session_id = f"u{len(user_id)}:{user_id}/{conversation_id}"
    if len(session_id) > limits.max_id_length:
        raise InvalidMemoryInputError(
            f"with user_id they make a session id of {len(session_id)} characters; "
            f"the maximum is {limits.max_id_length}",
            path="conversation_id",
        )
    return session_id
