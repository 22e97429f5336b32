"""A line of text from the start of a stored message, for list columns.

Lists fetch only the first characters of a message's JSON text (a message
may be megabytes), so the text is read from a prefix that may end anywhere,
even inside an escape sequence.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.template.defaultfilters import filesizeformat
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.persistence import PreviewSource

PREVIEW_CHARS = 80
SOURCE_CHARS = 1000
"""How much of the JSON text a list fetches per row to preview it."""

# "content" as a string, else the first text part of a list of parts.
_TEXT_STARTS = (re.compile(r'"content"\s*:\s*"'), re.compile(r'"text"\s*:\s*"'))
_LONGEST_ESCAPE = len("\\u0000")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def preview_cell(source: PreviewSource) -> SafeString | str:
    """A list's preview of a message, or the mark of one that does not open."""
    if source.unreadable is not None:
        return unreadable_mark(source.message_id, source.unreadable)
    if source.sealed_length is not None:
        return format_html(
            '<span class="anvia-sealed-long">(a sealed message of {}: too long to preview; '
            "its page shows it)</span>",
            filesizeformat(source.sealed_length),
        )
    return preview(source.text)


def unreadable_mark(row_id: int | None, error_type: str, record: str = "message") -> SafeString:
    """A message (or ``record``) that does not open: its row id and the
    error's class, in the admin's error colour; never any of its content."""
    return format_html(
        '<span class="anvia-unreadable" style="color: var(--error-fg)">'
        "⚠ {} {} cannot be opened ({})</span>",
        record,
        row_id if row_id is not None else "?",
        error_type,
    )


def preview(json_prefix: str | None, limit: int = PREVIEW_CHARS) -> str:
    """The message's text on one line, at most ``limit`` characters."""
    if not json_prefix:
        return ""
    # A prefix may end between the halves of a surrogate pair: a lone half
    # cannot be encoded into the page.
    text = _SURROGATES.sub("", " ".join(_text(json_prefix).split()))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _text(json_prefix: str) -> str:
    try:
        message: Any = json.loads(json_prefix)
    except ValueError:
        return _text_of_truncated(json_prefix)
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(part for part in parts if isinstance(part, str))
    return ""


def _text_of_truncated(json_prefix: str) -> str:
    for start in _TEXT_STARTS:
        match = start.search(json_prefix)
        if match is not None:
            return _string_prefix(json_prefix[match.end() :])
    return ""


def _string_prefix(body: str) -> str:
    """The decoded text of a JSON string body that may be cut short."""
    escaped = False
    for index, char in enumerate(body):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return str(json.loads(f'"{body[:index]}"'))
    # Cut inside the string: drop what may be half an escape sequence.
    for cut in range(len(body), max(len(body) - _LONGEST_ESCAPE, 0) - 1, -1):
        try:
            return str(json.loads(f'"{body[:cut]}"'))
        except ValueError:
            continue
    return ""
