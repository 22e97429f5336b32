"""Keyrings for the encryption tests (never keys of any real deployment)."""

from __future__ import annotations

import base64
from typing import Any

KEY_1 = base64.urlsafe_b64encode(bytes(range(32))).decode()
KEY_2 = base64.urlsafe_b64encode(bytes(range(1, 33))).decode()


def encryption(current: str = "k1", **keys: str) -> dict[str, Any]:
    """An ``ANVIA_DJANGO`` setting with encryption on."""
    return {"ENCRYPTION": {"KEYS": keys or {"k1": KEY_1}, "CURRENT": current}}
