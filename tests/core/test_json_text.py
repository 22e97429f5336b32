"""``loads``, the store's reading of message text, is ``json.loads``: same
values for any text, same errors, only faster for what ``dumps`` wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anvia_django.core.memory.validation import dumps, loads

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
whitespace = st.text(alphabet=" \t\r\n", max_size=2)


def outcome(decode: Any, text: Any) -> tuple[str, str]:
    """What ``decode(text)`` gives (its repr, which tells ``1`` from
    ``1.0``) or raises (its type and message)."""
    try:
        return ("value", repr(decode(text)))
    except Exception as error:
        return (type(error).__name__, str(error))


@given(json_values, whitespace, whitespace, st.sampled_from(["", "x", "}", "\ufeff", "1"]))
def test_any_text_around_a_json_value_reads_as_json_loads_reads_it(
    value: Any, before: str, after: str, junk: str
) -> None:
    written = dumps(value)
    assert loads(written) == value
    for text in (written, before + written + after, written + junk, junk + written):
        assert outcome(loads, text) == outcome(json.loads, text)


@given(st.text(max_size=30))
def test_arbitrary_text_reads_or_fails_as_with_json_loads(text: str) -> None:
    assert outcome(loads, text) == outcome(json.loads, text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": 1}', b'{"a":1}', "  "])
def test_what_json_loads_accepts_or_refuses_beyond_dumps_output(text: Any) -> None:
    assert outcome(loads, text) == outcome(json.loads, text)
