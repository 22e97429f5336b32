"""Failed-run records and compaction summaries with encryption at rest on.

A failed run's error message, traceback and partial messages are sealed
together in its ``messages`` column (its two text columns stay empty); its
error type stays readable, as the admin filters by it. A summary's message
is sealed in its ``message`` column. Readers call the ``open_*`` functions,
which leave values written before encryption was on as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections

from anvia_django.core.memory.errors import ErrorDescription
from anvia_django.core.memory.validation import dumps
from anvia_django.encryption import encryption_enabled
from anvia_django.fields import EncodedJSON

from .failed_runs import MAX_FAILED_RUN_BYTES, bound_record

MAX_SEALED_FAILED_RUN_CHARS = 12 * 1024 * 1024
"""On MySQL and MariaDB, a sealed failed run bigger than this (its text is
JSON, then base64) is bounded again, more tightly, to stay under the 16 MiB
packet MariaDB allows by default."""


def sealed_failed_run(
    alias: str,
    owner: tuple[str | None, str],
    conversation_id: int,
    run_id: str,
    error: ErrorDescription,
    encoded: list[str],
) -> dict[str, Any]:
    """The column values of a failed run with its payload sealed."""
    from anvia_django.encryption.records import failed_run_place, seal_record

    def seal(payload: str) -> str:
        return seal_record(alias, owner, conversation_id, failed_run_place(run_id), payload)

    sealed = bounded_sealed_payload(alias, error, encoded, seal)
    return {"error_message": "", "traceback": "", "messages": EncodedJSON(sealed)}


def bounded_sealed_payload(
    alias: str, error: ErrorDescription, encoded: list[str], seal: Callable[[str], str]
) -> str:
    """``seal`` of the failed run's payload (its error message, traceback and
    partial messages as one JSON object), bounded again on MySQL and MariaDB
    until the envelope fits their packet."""
    bound = MAX_FAILED_RUN_BYTES
    while True:
        payload = (
            f'{{"error_message":{dumps(error.message)},"traceback":{dumps(error.traceback)},'
            f'"messages":[{",".join(encoded)}]}}'
        )
        sealed = seal(payload)
        if connections[alias].vendor != "mysql" or len(sealed) <= MAX_SEALED_FAILED_RUN_CHARS:
            return sealed
        # Escaping made the text grow (control characters become \\u00XX).
        bound //= 2
        error, encoded = bound_record(error, encoded, bound)


def open_failed_run(
    alias: str, conversation_id: int, run_id: str, error_message: str, traceback: str, messages: Any
) -> tuple[str, str, Any]:
    """A failed run's error message, traceback and partial messages, opened."""
    if not encryption_enabled():
        return error_message, traceback, messages
    from anvia_django.encryption.envelope import is_envelope
    from anvia_django.encryption.records import failed_run_place, open_record

    if not is_envelope(messages):
        return error_message, traceback, messages

    payload = open_record(alias, conversation_id, failed_run_place(run_id), messages)
    return payload["error_message"], payload["traceback"], payload["messages"]


def sealed_summary(
    alias: str,
    owner: tuple[str | None, str],
    conversation_id: int,
    covers_through: int,
    message: Any,
) -> EncodedJSON:
    from anvia_django.encryption.records import seal_record, summary_place

    place = summary_place(covers_through)
    return EncodedJSON(seal_record(alias, owner, conversation_id, place, dumps(message)))


def open_summary(alias: str, conversation_id: int, covers_through: int, message: Any) -> Any:
    """A summary's message, opened (as it is when it was not sealed)."""
    if not encryption_enabled():
        return message
    from anvia_django.encryption.records import open_record, summary_place

    return open_record(alias, conversation_id, summary_place(covers_through), message)
