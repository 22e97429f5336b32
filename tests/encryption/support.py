"""Keyrings for the encryption tests (never keys of any real deployment)."""

from __future__ import annotations

import base64
from typing import Any

from django.db.models import Model

KEY_1 = base64.urlsafe_b64encode(bytes(range(32))).decode()
KEY_2 = base64.urlsafe_b64encode(bytes(range(1, 33))).decode()


def encryption(current: str = "k1", **keys: str) -> dict[str, Any]:
    """An ``ANVIA_DJANGO`` setting with encryption on."""
    return {"ENCRYPTION": {"KEYS": keys or {"k1": KEY_1}, "CURRENT": current}}


def blind_index() -> dict[str, Any]:
    """An ``ANVIA_DJANGO`` setting with encryption and the blind index on."""
    setting = encryption()
    setting["ENCRYPTION"]["BLIND_INDEX"] = True
    return setting


def flip_a_bit(row: Model, column: str = "message") -> None:
    """One bit of the ciphertext in ``row``'s sealed ``column``, in the
    database (an envelope's ``ct``)."""
    rows = type(row)._default_manager.filter(pk=row.pk)
    stored = rows.values_list(column, flat=True).get()
    sealed = bytearray(base64.b64decode(stored["ct"]))
    sealed[len(sealed) // 2] ^= 0x10
    stored["ct"] = base64.b64encode(bytes(sealed)).decode()
    rows.update(**{column: stored})
