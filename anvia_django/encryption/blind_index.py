"""A keyed blind index of the words of encrypted messages, for content
search (``ENCRYPTION["BLIND_INDEX"]``).

Each distinct normalised word of a message's text becomes a token: its
10-byte keyed BLAKE2b MAC under the index key, in hex. The tokens
ride in the envelope's ``content`` (``{"anvia_enc":1,"dk":..,"ct":..,
"content":"<tokens>"}``), which is exactly where the full-text index of
migration 0007 reads a message's text on every backend: no new column, no
new index. A search turns its words into tokens the same way, so it finds
exact (normalised) words, never prefixes, stems or phrases.

The index key is one for the whole database (staff search across users),
kept as a data key of the owner ``"blind-index"``: wrapped by the master
key, re-wrapped by rotation, never erased. What the tokens reveal is in
docs/production.md ("Encryption at rest").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from hashlib import blake2b
from typing import Any

from django.core.signals import setting_changed
from django.db import transaction
from django.views.decorators.debug import sensitive_variables

from anvia_django.conf import SETTINGS_NAME
from anvia_django.models import DataKey

from .envelope import MARKER
from .keys import data_key_for, key_alias, keyring
from .secret import Secret

INDEX_OWNER = "blind-index"
TOKEN_BYTES = 10
MAX_TOKENS = 20_000
"""The distinct words of one message that are indexed (the first ones):
PostgreSQL's ``tsvector`` holds at most 1 MB, and 20,000 tokens of 21
characters stay well under it. A message with more is found by those."""
_HEX_AND_SPACES = frozenset("0123456789abcdef ")
_WORD = re.compile(r"\w+")
_DERIVATION_NONCE = bytes(12)
_DERIVATION_LABEL = b"anvia-django blind index v1"
_index_keys: dict[str, Secret] = {}
"""Key alias -> the MAC key: fetched once per process."""


def blind_index_enabled() -> bool:
    return keyring().blind_index


def normalised_words(text: str) -> list[str]:
    """The distinct words of ``text``, NFKC-normalised and case-folded, in
    order of first appearance (what a search for a word compares)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return list(dict.fromkeys(_WORD.findall(folded)))


@sensitive_variables("key", "cipher", "derived")
def index_key(alias: str, *, create: bool = True) -> Secret | None:
    """The MAC key of the blind index of messages on ``alias``; ``None``
    when there is none yet and ``create`` is false (a search: nothing was
    indexed, and a read never writes)."""
    kalias = key_alias(alias)
    key = _index_keys.get(kalias)
    if key is not None:
        return key
    if not create and not DataKey.objects.using(kalias).filter(owner=INDEX_OWNER).exists():
        return None
    _, cipher = data_key_for(alias, INDEX_OWNER)
    # The data key only exists wrapped and as an AES-GCM cipher: a fixed
    # message under a fixed nonce, once per key, is a pseudo-random function
    # of it, which makes a separate key for the MAC (43 bytes; BLAKE2b takes 64).
    derived = Secret(cipher.encrypt(_DERIVATION_NONCE, _DERIVATION_LABEL, None), "index key")
    # Kept for the process once committed: a key made in the caller's
    # transaction may still be rolled back with it.
    transaction.on_commit(lambda: _index_keys.setdefault(kalias, derived), using=kalias)
    return derived


@sensitive_variables("key")
def tokens(key: Secret, words: Iterable[str]) -> list[str]:
    # Keyed BLAKE2b is a MAC (RFC 7693). The keyed state is made once and
    # copied per word: the key's block is not compressed again each time, and
    # no local holds the key's bytes.
    mac = blake2b(key=key.reveal(), digest_size=TOKEN_BYTES)
    found = []
    for word in words:
        each = mac.copy()
        each.update(word.encode())
        found.append(each.hexdigest())
    return found


@sensitive_variables("key")
def indexed(alias: str, envelopes: list[str], texts: list[str]) -> list[str]:
    """``envelopes`` (JSON text) of the messages whose JSON texts are
    ``texts``, each carrying the tokens of its words as its ``content`` when
    the blind index is on."""
    if not blind_index_enabled():
        return envelopes
    from anvia_django.core.memory.search_text import message_text
    from anvia_django.core.memory.validation import loads

    key = index_key(alias)
    assert key is not None
    carried = []
    for envelope, text in zip(envelopes, texts, strict=True):
        words = normalised_words(message_text(loads(text)))[:MAX_TOKENS]
        found = " ".join(tokens(key, words))
        carried.append(f'{envelope[:-1]},"content":"{found}"}}' if found else envelope)
    return carried


def carried_over(alias: str, envelope: str, source: Any) -> str:
    """``envelope``, sealed again from the column value ``source`` (a
    fork's copy), with the tokens ``source`` carried (they depend on the
    words and the index key only), or made when it was a plain row."""
    if not blind_index_enabled():
        return envelope
    if not (isinstance(source, dict) and MARKER in source):
        from anvia_django.core.memory.validation import dumps

        return indexed(alias, [envelope], [dumps(source)])[0]
    found = source.get("content")
    if not isinstance(found, str) or not found or not _HEX_AND_SPACES.issuperset(found):
        return envelope  # none, or not what indexed() writes: left out
    return f'{envelope[:-1]},"content":"{found}"}}'


@sensitive_variables("key")
def search_tokens(alias: str, text: str) -> tuple[str, ...]:
    """The tokens a search for the words of ``text`` looks for; none when
    nothing was ever indexed."""
    key = index_key(alias, create=False)
    return () if key is None else tuple(tokens(key, normalised_words(text)))


def _forget_if_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        _index_keys.clear()


setting_changed.connect(_forget_if_changed)
