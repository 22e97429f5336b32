"""Turning stored history into a conversation a chat model accepts.

Stored history may hold tool exchanges that a model API refuses: a crash
under the ``message`` policy can leave an assistant message whose tool calls
never got results, and two concurrent runs on one session interleave their
messages. Chat-completion APIs require every tool call to be answered by a
``tool`` message right after its assistant message. This repair is applied to
the model's input only; the stored history stays exactly as it was saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anvia_django.core.memory.types import Message

from .tools import tool_result_message

INTERRUPTED = "Error: this tool call was interrupted before it returned a result."


def tool_calls_of(message: Message) -> list[dict[str, Any]]:
    """The well-formed tool calls of an assistant message (each has a str id)."""
    if message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]


def repair_tool_exchanges(messages: Sequence[Message]) -> list[Message]:
    """Place each tool call's result right after its assistant message.

    A call without a stored result gets a synthetic :data:`INTERRUPTED`
    result; a tool message answering no earlier call is left out. Already
    well-formed input is returned unchanged (as a new list).
    """
    results: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        call_id = message.get("tool_call_id")
        if message.get("role") == "tool" and isinstance(call_id, str):
            results.setdefault(call_id, []).append(index)
    used: set[int] = set()
    repaired: list[Message] = []
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            continue
        repaired.append(message)
        for call in tool_calls_of(message):
            # Results are taken from later positions only: a result stored
            # before its call cannot belong to it.
            later = [i for i in results.get(call["id"], []) if i > index and i not in used]
            if later:
                used.add(later[0])
                repaired.append(messages[later[0]])
            else:
                name = call.get("name")
                repaired.append(
                    tool_result_message(
                        call["id"], name if isinstance(name, str) else "", INTERRUPTED
                    )
                )
    return repaired
