"""Opaque listing cursors: a signed (updated_at, id) keyset position.

Signing keeps cursors opaque and tamper-evident: a client can only hand back
a cursor this server issued, and cannot forge one to probe row ids.
"""

from __future__ import annotations

from datetime import datetime

from django.core import signing
from rest_framework.exceptions import ValidationError

from anvia_django.persistence import ConversationKey

_SALT = "anvia_django.api.conversation-cursor"


def encode_cursor(key: ConversationKey) -> str:
    return signing.dumps([key.updated_at.isoformat(), key.id], salt=_SALT, compress=False)


def decode_cursor(token: str) -> ConversationKey:
    try:
        moment, row_id = signing.loads(token, salt=_SALT)
        key = ConversationKey(updated_at=datetime.fromisoformat(moment), id=int(row_id))
    except (signing.BadSignature, TypeError, ValueError):
        raise ValidationError(
            {"cursor": ["cursor: not a cursor this server issued; start again without it"]}
        ) from None
    return key
