"""A keyed blind index of the words of encrypted messages, for content
search (``ENCRYPTION["BLIND_INDEX"]``).

Each distinct normalised word of a message's text becomes a token: its
10-byte keyed BLAKE2b MAC, in hex. The tokens ride in the envelope's
``content`` (``{"anvia_enc":1,"dk":..,"ct":..,"content":"<tokens>"}``),
which is exactly where the full-text index of migration 0007 reads a
message's text on every backend: no new column, no new index. A search
turns its words into tokens the same way, so it finds exact (normalised)
words, never prefixes, stems or phrases.

The MAC key is the owner's: derived from the data key the message is sealed
under. Erasure destroys the data keys, and with them every way to compute
the owner's tokens: a restored backup of the messages no longer confirms
any word they held. A search computes its words' tokens under the data keys
of the owners it covers (``search_alternatives``): one user's, one
tenant's, or every owner's up to :data:`MAX_SEARCH_KEYS`.

Versions before kept one index key for everything, a data key of the owner
``"blind-index"``: while that key exists, searches look for its tokens too
(rows indexed then), and erasure does not reach those tokens
(docs/production.md says how to end that).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from hashlib import blake2b

from django.views.decorators.debug import sensitive_variables

from .envelope import Cipher
from .keys import keyring
from .secret import Secret

INDEX_OWNER = "blind-index"
"""The owner of the one index key of earlier versions (never made now)."""
TOKEN_BYTES = 10
MAX_TOKENS = 20_000
"""The distinct words of one message that are indexed (the first ones):
PostgreSQL's ``tsvector`` holds at most 1 MB, and 20,000 tokens of 21
characters stay well under it. A message with more is found by those."""
MAX_SEARCH_KEYS = 256
"""The data keys one search computes tokens under: a search covering more
owners (a staff-wide search of a large deployment) is refused, and asks to
be narrowed to a user or a tenant. Each key adds a token per word to the
query the database matches."""
_WORD = re.compile(r"\w+")
_DERIVATION_NONCE = bytes(12)
_DERIVATION_LABEL = b"anvia-django blind index v1"


def blind_index_enabled() -> bool:
    return keyring().blind_index


def normalised_words(text: str) -> list[str]:
    """The distinct words of ``text``, NFKC-normalised and case-folded, in
    order of first appearance (what a search for a word compares)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return list(dict.fromkeys(_WORD.findall(folded)))


@sensitive_variables("cipher")
def index_key(cipher: Cipher) -> Secret:
    """The MAC key of the tokens of messages sealed under the data key ``cipher``."""
    # The data key only exists wrapped and as an AES-GCM cipher: a fixed
    # message under a fixed nonce, once per key, is a pseudo-random function
    # of it, which makes a separate key for the MAC (43 bytes; BLAKE2b takes 64).
    return Secret(cipher.encrypt(_DERIVATION_NONCE, _DERIVATION_LABEL, None), "index key")


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


@sensitive_variables("cipher", "key")
def indexed(cipher: Cipher, envelopes: list[str], texts: list[str]) -> list[str]:
    """``envelopes`` (JSON text) of the messages whose JSON texts are
    ``texts``, sealed under the data key ``cipher``, each carrying the
    tokens of its words under that key as its ``content`` when the blind
    index is on."""
    if not blind_index_enabled():
        return envelopes
    from anvia_django.core.memory.search_text import message_text
    from anvia_django.core.memory.validation import loads

    key = index_key(cipher)
    carried = []
    for envelope, text in zip(envelopes, texts, strict=True):
        words = normalised_words(message_text(loads(text)))[:MAX_TOKENS]
        found = " ".join(tokens(key, words))
        carried.append(f'{envelope[:-1]},"content":"{found}"}}' if found else envelope)
    return carried


@sensitive_variables("ciphers")
def search_alternatives(ciphers: Iterable[Cipher], text: str) -> tuple[tuple[str, ...], ...]:
    """For each word of ``text``, its tokens under each of the data keys
    ``ciphers``: a message matches when it holds one token of every word
    (a message's tokens are all under its own key, and two keys' tokens
    of different words coincide with probability 2^-80)."""
    words = normalised_words(text)
    per_key = [tokens(index_key(cipher), words) for cipher in ciphers]
    return tuple(tuple(found[index] for found in per_key) for index in range(len(words)))
