"""Sealing the records kept beside a transcript: a failed run's error and
partial messages, and compaction summaries.

They go under the data key of the conversation's owner, as its messages do,
in the same envelope form (so ``is_envelope`` tells them apart from values
written before encryption was on). The associated data binds each to its
conversation and its place there (the run id of a failed run, the position
a summary covers through), so a record copied to another row does not open.
"""

from __future__ import annotations

from typing import Any

from anvia_django.core.memory.validation import loads

from .envelope import (
    VERSION,
    Cipher,
    DecryptionError,
    decrypt_with_aad,
    envelope_parts,
    is_envelope,
    seal_with_aad,
)
from .keys import cipher_for


def failed_run_place(run_id: str) -> str:
    return f"failed-run\x00{run_id}"


def summary_place(covers_through: int) -> str:
    return f"summary\x00{covers_through}"


def _aad(key_id: int, conversation_id: int, place: str) -> bytes:
    return f"anvia-record\x00{VERSION}\x00{key_id}\x00{conversation_id}\x00{place}".encode()


def seal_record_with(
    cipher: Cipher, key_id: int, conversation_id: int, place: str, text: str
) -> str:
    return seal_with_aad(cipher, key_id, _aad(key_id, conversation_id, place), text)


def open_record(alias: str, conversation_id: int, place: str, value: Any) -> Any:
    """The value sealed in ``value`` (a decoded column value) at ``place``;
    ``value`` itself when it is not an envelope (written before encryption
    was on)."""
    if not is_envelope(value):
        return value
    key_id, ct = envelope_parts(value)
    aad = _aad(key_id, conversation_id, place)
    # A cached cipher may be a stale one for a reused key id: fetch it once more.
    for cached in (True, False):
        text = decrypt_with_aad(cipher_for(alias, key_id, cached=cached), ct, aad)
        if text is not None:
            return loads(text)
    what = place.split("\x00", 1)[0]
    raise DecryptionError(
        f"the {what} record of conversation {conversation_id} does not decrypt with data "
        f"key {key_id}: it was altered, moved from another row, or sealed under another key"
    )
