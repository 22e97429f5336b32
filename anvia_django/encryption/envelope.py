"""AES-GCM envelopes, free of Django: data keys wrapped by a master key, and
message text sealed by a data key with associated data binding it to its
place (conversation and position). The one module that imports
``cryptography`` (an optional extra): the rest of the app holds a
:data:`Cipher` without knowing where it comes from.

A sealed message is stored in the message column as the JSON object
``{"anvia_enc":1,"dk":<data key id>,"ct":"<base64 of nonce+ciphertext>"}``,
written in exactly that form, so reads parse it without a JSON parser. It
has no ``role``, so it can never be taken for a stored message.

Keys come and go as :class:`~.secret.Secret`, revealed only inside the
call that hands them to AES-GCM: no frame here holds a key's bytes in a
local, and an error names key ids, never keys.
"""

from __future__ import annotations

import binascii
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .secret import Secret

Cipher = AESGCM
"""A data key, ready to seal and open."""

NONCE_BYTES = 12
MARKER = "anvia_enc"
VERSION = 1
ENVELOPE_PREFIX = f'{{"{MARKER}":'
"""How every envelope's JSON text begins, and no stored message's."""
_HEAD = f'{ENVELOPE_PREFIX}{VERSION},"dk":'
_CT = ',"ct":"'
_TAIL = '"}'
_CONTENT = '","content":"'
"""What follows the ciphertext when the envelope carries the blind index's
tokens (blind_index.py)."""


class DecryptionError(Exception):
    """A ciphertext that does not open: tampered, moved, or under another key.
    The message names the key id and the row's place, never content."""


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def new_data_key() -> Secret:
    return Secret(AESGCM.generate_key(bit_length=256), "data key")


def cipher_of(data_key: Secret) -> Cipher:
    return AESGCM(data_key.reveal())


def _wrap_aad(owner: str, master_id: str) -> bytes:
    return b"anvia-dk\x00" + owner.encode() + b"\x00" + master_id.encode()


def wrap(master: Secret, master_id: str, owner: str, data_key: Secret) -> str:
    """``data_key`` sealed by ``master``, bound to its ``owner`` and master key id."""
    nonce = os.urandom(NONCE_BYTES)
    aad = _wrap_aad(owner, master_id)
    return _b64(nonce + AESGCM(master.reveal()).encrypt(nonce, data_key.reveal(), aad))


def unwrap(master: Secret, master_id: str, owner: str, wrapped: str) -> Secret:
    try:
        sealed = binascii.a2b_base64(wrapped)
        aad = _wrap_aad(owner, master_id)
        return Secret(
            AESGCM(master.reveal()).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad),
            "data key",
        )
    except (InvalidTag, ValueError, binascii.Error):
        raise DecryptionError(
            f"a data key does not unwrap with master key {master_id!r}: "
            "the key under that id is not the one it was wrapped with, or the row was altered"
        ) from None


_MESSAGE_AAD = b"anvia-msg\x00%d\x00%d\x00%d\x00%d"


def message_aad(data_key_id: int, conversation_id: int, position: int) -> bytes:
    # Bytes formatting: the same bytes as encoding an f-string, in half the time.
    return _MESSAGE_AAD % (VERSION, data_key_id, conversation_id, position)


def seal(cipher: AESGCM, data_key_id: int, conversation_id: int, position: int, text: str) -> str:
    """The envelope (JSON text) of ``text`` stored at ``position`` of ``conversation_id``."""
    return seal_with_aad(
        cipher, data_key_id, message_aad(data_key_id, conversation_id, position), text
    )


def seal_with_aad(cipher: AESGCM, data_key_id: int, aad: bytes, text: str) -> str:
    """The envelope (JSON text) of ``text`` bound to ``aad``."""
    nonce = os.urandom(NONCE_BYTES)
    body = _b64(nonce + cipher.encrypt(nonce, text.encode(), aad))
    return f'{{"{MARKER}":{VERSION},"dk":{data_key_id},"ct":"{body}"}}'


def seal_bytes(cipher: AESGCM, data_key_id: int, aad: bytes, data: bytes) -> bytes:
    """``data`` sealed under data key ``data_key_id``, bound to ``aad``: the
    key id's digits, a colon, then the nonce and the ciphertext."""
    nonce = os.urandom(NONCE_BYTES)
    return b"%d:%b%b" % (data_key_id, nonce, cipher.encrypt(nonce, data, aad))


def sealed_bytes_key(sealed: bytes) -> int:
    """The data key id of a :func:`seal_bytes` value."""
    digits, colon, _ = sealed[:24].partition(b":")
    if not colon or not digits.isdigit():
        raise DecryptionError("a sealed value has an unknown form")
    return int(digits)


def open_bytes(cipher: AESGCM, sealed: bytes, aad: bytes) -> bytes | None:
    """The bytes sealed by :func:`seal_bytes`; ``None`` when they do not
    open (the caller names the place in its error)."""
    raw = memoryview(sealed)[sealed.index(b":") + 1 :]
    try:
        return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad)
    except (InvalidTag, ValueError):
        return None


def envelope_head(data_key_id: int) -> str:
    """How the JSON text of every envelope sealed under ``data_key_id`` begins."""
    return f'{{"{MARKER}":{VERSION},"dk":{data_key_id},"ct":"'


def parse_envelope_text(text: str) -> tuple[int, str]:
    """The data key id and ciphertext of an envelope's JSON text.

    Sliced, not matched: a regular expression over the base64 cost more than
    the decryption for a long message. What the slices hold is checked where
    it is used: the id's ASCII digits here, the ciphertext's alphabet and
    padding by :func:`open_sealed`'s strict base64 decoding."""
    split = text.find(_CT, len(_HEAD))
    if split != -1 and text.startswith(_HEAD) and text.endswith(_TAIL):
        digits = text[len(_HEAD) : split]
        start = split + len(_CT)
        end = text.find('"', start)  # base64 has no quote
        rest = text[end:]
        if (
            digits.isascii()
            and digits.isdigit()
            and (rest == _TAIL or (rest.startswith(_CONTENT) and _carries_tokens(rest)))
        ):
            return int(digits), text[start:end]
    raise DecryptionError("an encrypted message has an envelope of an unknown form")


def _carries_tokens(rest: str) -> bool:
    """Whether ``rest`` (from the ciphertext's closing quote on) is
    ``","content":"<hex tokens and spaces>"}``."""
    tokens = rest[len(_CONTENT) : -len(_TAIL)]
    return not tokens.strip("0123456789abcdef ")


def is_envelope(value: Any) -> bool:
    """Whether a decoded column value is an envelope."""
    return isinstance(value, dict) and MARKER in value


def envelope_parts(value: dict[str, Any]) -> tuple[int, str]:
    """The data key id and ciphertext of a decoded envelope."""
    key_id, ct = value.get("dk"), value.get("ct")
    if (
        value.get(MARKER) != VERSION
        or not isinstance(key_id, int)
        or isinstance(key_id, bool)
        or not isinstance(ct, str)
    ):
        raise DecryptionError("an encrypted message has an envelope of an unknown form")
    return key_id, ct


def open_sealed(cipher: AESGCM, key_id: int, ct: str, conversation_id: int, position: int) -> str:
    """The text sealed as ``ct`` under data key ``key_id``, which must belong at this place."""
    text = decrypt_with_aad(cipher, ct, message_aad(key_id, conversation_id, position))
    if text is None:
        raise DecryptionError(
            f"the message at position {position} of conversation {conversation_id} does not "
            f"decrypt with data key {key_id}: it was altered, moved from another row, or "
            "sealed under another key"
        )
    return text


def decrypt_with_aad(cipher: AESGCM, ct: str, aad: bytes) -> str | None:
    """The text sealed as ``ct`` bound to ``aad``; ``None`` when it does not
    open (the caller names the place in its error)."""
    try:
        # Strict: a character outside the alphabet is an error, not skipped.
        raw = memoryview(binascii.a2b_base64(ct, strict_mode=True))
        return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad).decode()
    except (InvalidTag, ValueError, binascii.Error):
        return None
