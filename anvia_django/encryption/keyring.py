"""The master keys of ``ANVIA_DJANGO["ENCRYPTION"]``: parsed, validated, cached.

Settings::

    ANVIA_DJANGO = {
        "ENCRYPTION": {
            "KEYS": {"k1": "<urlsafe base64 of 32 random bytes>"},
            "CURRENT": "k1",
            # Optional: more keys from an environment variable holding
            # "id=base64,id=base64" (merged over KEYS).
            "KEYS_ENV": "ANVIA_DJANGO_MASTER_KEYS",
            # Optional: the database alias of the data key table (None: the
            # alias the messages are written to).
            "KEY_DATABASE": None,
            # Optional: content search over encrypted messages through a
            # keyed blind index of their words (exact-word match).
            "BLIND_INDEX": False,
        }
    }

No error message here ever contains a key: only its id. Keys are held as
:class:`~.secret.Secret` (no repr), the keyring's repr names key ids only,
and the functions that handle the settings' key text are marked with
``sensitive_variables`` (Django's mailed error report masks their locals).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.views.decorators.debug import sensitive_variables

from .secret import Secret

KEY_BYTES = 32
ALLOWED = frozenset({"KEYS", "CURRENT", "KEYS_ENV", "KEY_DATABASE", "BLIND_INDEX"})


class KeyringError(ValueError):
    """The keyring setting is wrong; the message names key ids, never keys."""


@dataclass(frozen=True, slots=True, repr=False)
class Keyring:
    keys: Mapping[str, Secret]
    current: str
    key_database: str | None
    blind_index: bool = False

    def __repr__(self) -> str:
        # Key ids only: a keyring in a local variable is on every error page
        # that shows the frame.
        return (
            f"<Keyring ids={sorted(self.keys)} current={self.current!r} "
            f"key_database={self.key_database!r} blind_index={self.blind_index}>"
        )

    def master(self, key_id: str) -> Secret:
        try:
            return self.keys[key_id]
        except KeyError:
            raise MissingKeyError(
                f"master key {key_id!r} is not in the keyring "
                "(ANVIA_DJANGO['ENCRYPTION']['KEYS'] or its KEYS_ENV variable)"
            ) from None


class MissingKeyError(LookupError):
    """A key the data needs is not there: names the key id, never content."""


@sensitive_variables("value", "text", "raw")
def decode_key(key_id: str, value: Any) -> Secret:
    """``value`` (URL-safe base64 of 32 bytes) as a key; ``KeyringError`` naming ``key_id``."""
    if not isinstance(value, str | bytes):
        raise KeyringError(f"master key {key_id!r} must be a URL-safe base64 string")
    text = value.encode("ascii", "replace") if isinstance(value, str) else value
    try:
        raw = base64.urlsafe_b64decode(text.strip() + b"=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError):
        raise KeyringError(f"master key {key_id!r} is not valid URL-safe base64") from None
    if len(raw) != KEY_BYTES:
        raise KeyringError(
            f"master key {key_id!r} decodes to {len(raw)} bytes; it must be {KEY_BYTES}"
        )
    return Secret(raw, f"master key {key_id!r}")


@sensitive_variables("value", "keys", "part", "key")
def _keys_from_env(name: str) -> dict[str, str]:
    value = os.environ.get(name)
    if value is None:
        raise KeyringError(f"KEYS_ENV names the environment variable {name!r}, which is not set")
    keys: dict[str, str] = {}
    for part in filter(None, (item.strip() for item in value.split(","))):
        key_id, sep, key = part.partition("=")
        if not sep or not key_id.strip():
            raise KeyringError(
                f"environment variable {name!r}: each entry must be id=base64 "
                f"(entry {len(keys) + 1})"
            )
        keys[key_id.strip()] = key.strip()
    return keys


@sensitive_variables("config", "given", "merged", "value", "keys")
def parse_keyring(config: Any) -> Keyring:
    """``ANVIA_DJANGO["ENCRYPTION"]`` as a :class:`Keyring`; ``KeyringError`` if wrong."""
    if not isinstance(config, Mapping):
        raise KeyringError("must be a dict with KEYS and CURRENT")
    unknown = sorted(set(config) - ALLOWED)
    if unknown:
        raise KeyringError(f"unknown entries {unknown}; allowed: {sorted(ALLOWED)}")
    given = config.get("KEYS") or {}
    if not isinstance(given, Mapping):
        raise KeyringError("KEYS must be a dict of key id to URL-safe base64 key")
    merged: dict[str, Any] = dict(given)
    env_name = config.get("KEYS_ENV")
    if env_name is not None:
        if not isinstance(env_name, str) or not env_name:
            raise KeyringError("KEYS_ENV must be the name of an environment variable")
        merged.update(_keys_from_env(env_name))
    keys: dict[str, Secret] = {}
    for key_id, value in merged.items():
        if not isinstance(key_id, str) or not key_id or len(key_id) > 64:
            raise KeyringError("key ids must be non-empty strings of at most 64 characters")
        keys[key_id] = decode_key(key_id, value)
    if not keys:
        raise KeyringError("KEYS holds no key")
    current = config.get("CURRENT")
    if not isinstance(current, str) or current not in keys:
        raise KeyringError(f"CURRENT {current!r} is not one of the key ids {sorted(keys)}")
    key_database = config.get("KEY_DATABASE")
    if key_database is not None and not isinstance(key_database, str):
        raise KeyringError("KEY_DATABASE must be a database alias or None")
    blind_index = config.get("BLIND_INDEX", False)
    if not isinstance(blind_index, bool):
        raise KeyringError("BLIND_INDEX must be True or False")
    return Keyring(keys, current, key_database, blind_index)
