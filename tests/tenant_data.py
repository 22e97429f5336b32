"""Conversations of several tenants, for the inspector's tenant filters."""

from __future__ import annotations

from typing import Any

from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.scope import parse_scope
from anvia_django.models import Conversation

from .inspector_data import EPOCH, make_conversations

TENANT_SCOPE = {"user_id": True, "metadata_keys": ["tenant_id", "org.id"]}
"""A scope with two metadata keys: a plain one and a dotted path."""


def tenant_metadata(tenant: str, org: str) -> dict[str, Any]:
    return {"tenant_id": tenant, "org": {"id": org}}


def make_tenant_conversations(
    count: int, *, tenant: str, org: str = "o1", user_id: str | None = "u1", prefix: str
) -> list[Conversation]:
    """``count`` conversations of one tenant, in bulk, keyed as the store
    would key them under :data:`TENANT_SCOPE`."""
    conversations = make_conversations(count, user_id=user_id, prefix=prefix, start=EPOCH)
    metadata = tenant_metadata(tenant, org)
    scope = parse_scope(TENANT_SCOPE)
    for conversation in conversations:
        context = MemoryContext(conversation.session_id, user_id=user_id, metadata=metadata)
        conversation.metadata = metadata
        conversation.scope_key = scope.key(context)
    Conversation.objects.bulk_update(conversations, ["metadata", "scope_key"])
    return conversations
