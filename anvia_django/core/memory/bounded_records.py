"""A failed-run record kept to a size, for databases that bound one
statement (MySQL's and MariaDB's ``max_allowed_packet``: the dialect says).

The error text, the traceback and the partial messages together are kept
to the bound: the message and the traceback each keep their first and last
parts around a visible marker that names the original size, and the
partial messages are kept from the first on while they fit, followed by one
of role ``"anvia-django"`` saying how many were left out and how big they
were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .errors import ErrorDescription


@dataclass(frozen=True, slots=True)
class RecordLimit:
    """The bounds of one failed-run record, written in one INSERT."""

    bytes: int | None = None
    """Its UTF-8 bytes (error text, traceback and partial messages together);
    ``None``: unbounded."""
    sealed_chars: int | None = None
    """Its characters once sealed (JSON, then base64); ``None``: unbounded."""

    def fits(self, sealed: str) -> bool:
        return self.sealed_chars is None or len(sealed) <= self.sealed_chars


UNBOUNDED = RecordLimit()


_TEXT_SHARE = 4
"""When the record is over the bound, the message and the traceback each
keep at most this fraction of it; the partial messages get the rest."""

_MARKER = (
    "\n\n[... anvia-django left out {left_out} of the {size} bytes of this text here: "
    "a failed-run record is kept to {bound} bytes on MySQL and MariaDB ...]\n\n"
)
LEFT_OUT_ROLE = "anvia-django"
"""The role of the message that stands, last, for the partial messages left out."""
_MARKER_MESSAGE_ROOM = 512


def bound_record(
    error: ErrorDescription, encoded: list[str], bound: int
) -> tuple[ErrorDescription, list[str]]:
    """``error`` and ``encoded`` kept to ``bound`` UTF-8 bytes in all."""
    sizes = [_size(message) + 1 for message in encoded]  # and its comma
    if _size(error.message) + _size(error.traceback) + sum(sizes) <= bound:
        return error, encoded
    message = bound_text(error.message, bound // _TEXT_SHARE, bound)
    traceback = bound_text(error.traceback, bound // _TEXT_SHARE, bound)
    room = bound - _size(message) - _size(traceback) - _MARKER_MESSAGE_ROOM
    kept = 0
    while kept < len(encoded) and sizes[kept] <= room:
        room -= sizes[kept]
        kept += 1
    left_out = encoded[kept:]
    if left_out:
        marker = _left_out(len(left_out), sum(sizes[kept:]) - len(left_out), bound)
        return ErrorDescription(error.type, message, traceback), [*encoded[:kept], marker]
    return ErrorDescription(error.type, message, traceback), encoded


def bound_text(text: str, limit: int, bound: int) -> str:
    """``text`` if it is at most ``limit`` UTF-8 bytes, else its beginning
    and its end around a marker naming its size (``limit`` bytes in all)."""
    data = text.encode("utf-8")
    size = len(data)
    if size <= limit:
        return text
    marker_room = len(_MARKER) + 60  # the figures in the marker
    keep = max(limit - marker_room, 0)
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[size - keep // 2 :].decode("utf-8", "ignore") if keep else ""
    left_out = size - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return head + _MARKER.format(left_out=left_out, size=size, bound=bound) + tail


def _left_out(count: int, size: int, bound: int) -> str:
    """The message that stands for the last ``count`` partial messages, ``size`` bytes."""
    return json.dumps(
        {
            "role": LEFT_OUT_ROLE,
            "content": (
                f"[anvia-django left out the last {count} partial messages ({size} bytes "
                f"as JSON) here: a failed-run record is kept to {bound} bytes on MySQL "
                "and MariaDB]"
            ),
            "left_out_messages": count,
            "left_out_bytes": size,
        },
        separators=(",", ":"),
    )


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))
