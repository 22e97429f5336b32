"""The retried-append check (SPEC invariant 7), the one in Python.

An append whose run id, turn and messages equal the messages stored last
for that run and turn is a retry (a caller that saw an error after the
database committed) and writes nothing. Every dialect's append in steps
asks this, with either codec; PostgreSQL's append function checks the same
in SQL, its text frozen in migrations 0005, 0006 and 0008.

Messages are compared as JSON text, not as decoded values: in Python
``True == 1 == 1.0`` would call different messages equal.
"""

from __future__ import annotations

from collections.abc import Sequence

from anvia_django.persistence.codec import Codec


def is_retry(
    codec: Codec,
    conversation_id: int,
    stored_newest_first: Sequence[tuple[int, str]],
    messages: list[str],
) -> bool:
    """Whether ``messages`` (JSON texts) are what the newest rows stored for
    their run and turn hold: ``(position, column text)``, newest first, as
    many as ``messages`` or fewer."""
    if len(stored_newest_first) != len(messages):
        return False
    stored = [
        codec.open_text(conversation_id, position, text)
        for position, text in reversed(stored_newest_first)
    ]
    return stored == messages
