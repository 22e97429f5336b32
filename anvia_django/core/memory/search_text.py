"""A message's searchable text, a query's words, and the snippet a hit shows.

``message_text`` is the Python twin of the text migration 0007 indexes, so
the snippet is cut from the same text the database matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SNIPPET_LENGTH = 160
"""Characters of a snippet, ellipses aside."""
_BEFORE = 50
"""Characters of context kept before the first word found."""
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def message_text(message: Any) -> str:
    """``content`` when it is a string; else the ``text`` of each object in a
    ``content`` list, space-separated; else nothing."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def snippet(text: str, words: Sequence[str]) -> str:
    """About ``SNIPPET_LENGTH`` characters of ``text`` (whitespace collapsed)
    around the first of ``words`` found, marked with ellipses where cut."""
    flat = _SPACES.sub(" ", text).strip()
    start = 0
    if words:
        pattern = "|".join(re.escape(word) for word in words)
        found = re.search(rf"(?<!\w)(?:{pattern})", flat, re.IGNORECASE)
        if found is not None:
            start = max(0, found.start() - _BEFORE)
    end = min(len(flat), start + SNIPPET_LENGTH)
    start = max(0, min(start, end - SNIPPET_LENGTH))
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


@dataclass(frozen=True, slots=True)
class SearchTerms:
    text: str
    """The query as given (validated): PostgreSQL parses it with its own parser."""
    words: tuple[str, ...]
    """Its words, lowercased, each once: what the other backends look for."""
    blind: bool = False
    """Whether ``text`` and ``words`` are blind index tokens of the query's
    words (encryption at rest), not the words themselves."""
    alternatives: tuple[tuple[str, ...], ...] = ()
    """Blind: for each word of the query, its tokens under each owner's key
    the search covers; a row matches with one token of every word. Empty:
    every one of ``words`` must match."""


def terms_of(text: str) -> SearchTerms:
    words = dict.fromkeys(word.lower() for word in _WORD.findall(text))
    return SearchTerms(text=text, words=tuple(words))
