"""AES-GCM envelopes, free of Django: data keys wrapped by a master key, and
message text sealed by a data key with associated data binding it to its
place (conversation and position).

A sealed message is stored in the message column as the JSON object
``{"anvia_enc": 1, "dk": <data key id>, "ct": "<base64url nonce+ciphertext>"}``.
It has no ``role``, so it can never be taken for a stored message.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12
MARKER = "anvia_enc"
VERSION = 1


class DecryptionError(Exception):
    """A ciphertext that does not open: tampered, moved, or under another key.
    The message names the key id and the row's place, never content."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode("ascii"))


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def _wrap_aad(owner: str, master_id: str) -> bytes:
    return b"anvia-dk\x00" + owner.encode() + b"\x00" + master_id.encode()


def wrap(master: bytes, master_id: str, owner: str, data_key: bytes) -> str:
    """``data_key`` sealed by ``master``, bound to its ``owner`` and master key id."""
    nonce = os.urandom(NONCE_BYTES)
    return _b64(nonce + AESGCM(master).encrypt(nonce, data_key, _wrap_aad(owner, master_id)))


def unwrap(master: bytes, master_id: str, owner: str, wrapped: str) -> bytes:
    raw = _unb64(wrapped)
    try:
        return AESGCM(master).decrypt(
            raw[:NONCE_BYTES], raw[NONCE_BYTES:], _wrap_aad(owner, master_id)
        )
    except InvalidTag:
        raise DecryptionError(
            f"a data key does not unwrap with master key {master_id!r}: "
            "the key under that id is not the one it was wrapped with, or the row was altered"
        ) from None


def message_aad(data_key_id: int, conversation_id: int, position: int) -> bytes:
    return f"anvia-msg\x00{VERSION}\x00{data_key_id}\x00{conversation_id}\x00{position}".encode()


def seal(cipher: AESGCM, data_key_id: int, conversation_id: int, position: int, text: str) -> str:
    """The envelope (JSON text) of ``text`` stored at ``position`` of ``conversation_id``."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = cipher.encrypt(
        nonce, text.encode(), message_aad(data_key_id, conversation_id, position)
    )
    return f'{{"{MARKER}":{VERSION},"dk":{data_key_id},"ct":"{_b64(nonce + sealed)}"}}'


def is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and MARKER in value


def envelope_key_id(value: dict[str, Any]) -> int:
    key_id = value.get("dk")
    if value.get(MARKER) != VERSION or not isinstance(key_id, int) or isinstance(key_id, bool):
        raise DecryptionError("an encrypted message has an envelope of an unknown form")
    return key_id


def open_sealed(cipher: AESGCM, value: dict[str, Any], conversation_id: int, position: int) -> str:
    """The text sealed in envelope ``value``, which must belong at this place."""
    key_id = envelope_key_id(value)
    try:
        raw = _unb64(str(value["ct"]))
        text = cipher.decrypt(
            raw[:NONCE_BYTES], raw[NONCE_BYTES:], message_aad(key_id, conversation_id, position)
        )
    except (InvalidTag, KeyError, ValueError):
        raise DecryptionError(
            f"the message at position {position} of conversation {conversation_id} does not "
            f"decrypt with data key {key_id}: it was altered, moved from another row, or "
            "sealed under another key"
        ) from None
    return text.decode()
