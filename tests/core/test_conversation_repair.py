"""repair_tool_exchanges: any stored history becomes a valid model input."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from anvia_django.core import Message, repair_tool_exchanges
from anvia_django.core.runtime.conversation import INTERRUPTED

from .crash import well_formed
from .doubles import assistant, tool_result, user

CALL_IDS = st.sampled_from(["a", "b", "c", "d"])

messages = st.one_of(
    st.builds(user, st.sampled_from(["hi", "more"])),
    st.builds(assistant, st.just("ok")),
    st.lists(CALL_IDS, min_size=1, max_size=3, unique=True).map(
        lambda ids: assistant(None, *((i, "t", {}) for i in ids))
    ),
    st.builds(lambda i: tool_result(i, "t", f"result {i}"), CALL_IDS),
)


@given(st.lists(messages, max_size=12))
def test_output_is_well_formed_and_keeps_every_non_tool_message(history: list[Message]) -> None:
    repaired = repair_tool_exchanges(history)
    assert well_formed(repaired)
    assert [m for m in repaired if m["role"] != "tool"] == [
        m for m in history if m["role"] != "tool"
    ]
    # Tool results come from the history or say the call was interrupted.
    for message in repaired:
        if message["role"] == "tool":
            assert message in history or message["content"] == INTERRUPTED


@given(st.lists(messages, max_size=12))
def test_well_formed_history_is_left_as_it_is(history: list[Message]) -> None:
    repaired = repair_tool_exchanges(history)
    assert repair_tool_exchanges(repaired) == repaired
    if well_formed(history) and all(
        m["role"] != "tool" or sum(h is m for h in history) == 1 for m in history
    ):
        assert repaired == history


def test_interleaved_runs_are_regrouped() -> None:
    ask_a = assistant(None, ("a", "t", {}))
    ask_b = assistant(None, ("b", "t", {}))
    result_a, result_b = tool_result("a", "t", "A"), tool_result("b", "t", "B")
    history = [user("1"), user("2"), ask_a, ask_b, result_b, result_a]
    assert repair_tool_exchanges(history) == [
        user("1"),
        user("2"),
        ask_a,
        result_a,
        ask_b,
        result_b,
    ]
