"""The retried-append check (SPEC invariant 7) is one function
(persistence/retry_check.py): every dialect's append in steps asks it,
with either codec."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from anvia_django.core.memory.validation import dumps
from anvia_django.models import MemoryMessage
from anvia_django.persistence import dialects
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.dialects import AppendRequest, Dialect
from anvia_django.persistence.retry_check import is_retry
from tests.encryption.support import encryption

pytestmark = pytest.mark.django_db

DIALECTS = {
    "generic": lambda: dialects.GENERIC,
    "the vendor's": lambda: dialects.vendor_dialect(connection),
}


@pytest.fixture(params=["plain", "sealed"])
def codec(request: pytest.FixtureRequest) -> Iterator[Codec]:
    settings: dict[str, Any] = {} if request.param == "plain" else encryption()
    with override_settings(ANVIA_DJANGO=settings):
        yield codec_for("default")


def request(messages: list[dict[str, Any]], *, turn: int = 1) -> AppendRequest:
    encoded = [dumps(message) for message in messages]
    return AppendRequest(
        session_id="s",
        scope_key="",
        user_id=None,
        metadata=None,
        run_id="run-1",
        turn=turn,
        roles=[message["role"] for message in messages],
        encoded=encoded,
        now=timezone.now(),
    )


def append(dialect: Dialect, codec: Codec, append: AppendRequest) -> bool:
    """Whether the append in steps wrote (a retry rolls back its reservation)."""
    try:
        with transaction.atomic():
            if dialect.append_under_lock("default", append, codec) is None:
                raise _Retry
    except _Retry:
        return False
    return True


class _Retry(Exception):
    pass


def stored() -> list[tuple[int, int, Any]]:
    # Model instances open sealed rows.
    rows = MemoryMessage.objects.order_by("position")
    return [(row.position, row.turn, row.message) for row in rows]


@pytest.mark.parametrize("dialect_of", DIALECTS.values(), ids=DIALECTS.keys())
def test_every_dialect_with_either_codec_recognises_a_retry_and_only_a_retry(
    dialect_of: Any, codec: Codec
) -> None:
    dialect = dialect_of()
    hi, there = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "there"}
    assert append(dialect, codec, request([hi, there]))
    assert not append(dialect, codec, request([hi, there]))  # the same: a retry
    assert not append(dialect, codec, request([there]))  # the stored tail of it: a retry too
    assert append(dialect, codec, request([hi]))  # not the tail: a new message
    assert append(dialect, codec, request([hi], turn=2))  # another turn
    # Equal in Python, not as JSON: 1 is not true.
    assert append(dialect, codec, request([{"role": "tool", "content": 1}], turn=3))
    assert append(dialect, codec, request([{"role": "tool", "content": True}], turn=3))
    assert not append(dialect, codec, request([{"role": "tool", "content": True}], turn=3))
    assert [(position, turn) for position, turn, _ in stored()] == [
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 2),
        (4, 3),
        (5, 3),
    ]
    assert [message for *_, message in stored()][-2:] == [
        {"role": "tool", "content": 1},
        {"role": "tool", "content": True},
    ]


def test_a_tail_of_another_length_is_no_retry() -> None:
    plain = codec_for("default")
    assert is_retry(plain, 1, [(1, '"b"'), (0, '"a"')], ['"a"', '"b"'])
    assert not is_retry(plain, 1, [(1, '"b"')], ['"a"', '"b"'])
    assert not is_retry(plain, 1, [(1, '"b"'), (0, '"a"')], ['"b"'])
