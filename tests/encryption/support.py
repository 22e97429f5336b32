"""Keyrings for the encryption tests (never keys of any real deployment)."""

from __future__ import annotations

import base64
from typing import Any

from anvia_django.models import MemoryMessage

KEY_1 = base64.urlsafe_b64encode(bytes(range(32))).decode()
KEY_2 = base64.urlsafe_b64encode(bytes(range(1, 33))).decode()


def encryption(current: str = "k1", **keys: str) -> dict[str, Any]:
    """An ``ANVIA_DJANGO`` setting with encryption on."""
    return {"ENCRYPTION": {"KEYS": keys or {"k1": KEY_1}, "CURRENT": current}}


def flip_a_bit(message: MemoryMessage) -> None:
    """One bit of its ciphertext, in the database (an envelope's ``ct``)."""
    stored = MemoryMessage.objects.filter(pk=message.pk).values_list("message", flat=True).get()
    sealed = bytearray(base64.b64decode(stored["ct"]))
    sealed[len(sealed) // 2] ^= 0x10
    stored["ct"] = base64.b64encode(bytes(sealed)).decode()
    MemoryMessage.objects.filter(pk=message.pk).update(message=stored)
