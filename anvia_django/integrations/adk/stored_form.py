"""How an ADK event is stored: as a message of its session's conversation.

The message keeps the whole event (``adk_event``, ADK's own JSON form of
it) and, beside it, the shape every message of the store has, so that the
admin, the API, the exports and the content search read it as they read any
transcript:

- ``role``: ``"user"`` for the user's events, ``"tool"`` for an event that
  returns function results, ``"assistant"`` for the others;
- ``author``: the event's author (the agent's name, or ``"user"``);
- ``content``: the text of its parts, when it has any;
- ``tool_calls``: ``[{"id", "name", "arguments"}]`` for function calls;
  a tool message has ``tool_call_id`` and ``name`` of the first result,
  and all results as ``content`` (JSON text);
- ``state_delta``: the state keys the event changed, when it changed some.

Only ``adk_event`` is read back: the rest is for people and search.
"""

from __future__ import annotations

import json
from typing import Any

EVENT_KEY = "adk_event"


def event_message(event: dict[str, Any]) -> dict[str, Any]:
    """The message that stores ``event`` (an event's JSON form)."""
    parts = (event.get("content") or {}).get("parts") or []
    text = "".join(part["text"] for part in parts if isinstance(part.get("text"), str))
    calls = [part["function_call"] for part in parts if part.get("function_call")]
    results = [part["function_response"] for part in parts if part.get("function_response")]
    author = event.get("author") or ""
    message: dict[str, Any] = {"role": "assistant", "author": author}
    if results:
        message.update(
            role="tool",
            tool_call_id=results[0].get("id") or "",
            name=results[0].get("name") or "",
            content=json.dumps([r.get("response") for r in results], ensure_ascii=False),
        )
    elif author == "user":
        message["role"] = "user"
    if text and not results:
        message["content"] = text
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id") or "", "name": c.get("name") or "", "arguments": c.get("args") or {}}
            for c in calls
        ]
    delta = (event.get("actions") or {}).get("state_delta")
    if delta:
        message["state_delta"] = delta
    message[EVENT_KEY] = event
    return message


def stored_event(message: dict[str, Any]) -> dict[str, Any]:
    """The event's JSON form a stored message holds."""
    event: dict[str, Any] = message[EVENT_KEY]
    return event


SHOWN_APART = ("author", "state_delta", EVENT_KEY)
"""The fields of a stored event the admin shows as blocks of their own."""


def shown_apart(message: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """An ADK event's labelled blocks for a reader (its author, the state
    it changed, the whole event), ``None`` for a message that is not one."""
    if not isinstance(message.get(EVENT_KEY), dict):
        return None
    blocks: list[tuple[str, Any]] = [("author", message.get("author", ""))]
    if message.get("state_delta"):
        blocks.append(("state delta", message["state_delta"]))
    blocks.append(("ADK event", message[EVENT_KEY]))
    return blocks
