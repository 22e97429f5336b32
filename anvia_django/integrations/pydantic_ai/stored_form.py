"""The stored form of a Pydantic AI message, as plain JSON (format 1).

Nothing here imports Pydantic AI: the admin and the inspector API read this
form without the extra installed. :mod:`.codec` turns messages into it and
back. A stored message is::

    {
      "role": "user" | "assistant" | "tool" | "system",
      "content": [{"type": "text", "text": "...", "part": 0}, ...],
      "pydantic_ai": {"format": 1, "message": {"kind": "request", "parts": [...], ...}}
    }

``pydantic_ai.message`` is the message as Pydantic AI's
``ModelMessagesTypeAdapter`` writes it in JSON mode (``kind``, ``parts``
with their ``part_kind``, timestamps, usage, provider details; bytes as
base64), with one change: every string a part holds as its ``content``
(or as an item of a ``content`` list, as a user prompt's text beside an
image) is moved to ``content`` above, as ``{"type": "text", "text": ...,
"part": <part index>}`` (plus ``"item": <list index>``, the item left as
``null``). So the text is stored once, and is what the store's search,
the admin's previews and any OpenAI-shaped reader see; putting each text
back where ``part`` and ``item`` say gives Pydantic AI's form exactly.

``format`` is bumped whenever this layout changes; a reader refuses a
format it does not know rather than guess.
"""

from __future__ import annotations

from typing import Any

FORMAT = 1
KEY = "pydantic_ai"
"""The key of a stored message that holds the Pydantic AI form."""

_TOOL_RESULT_KINDS = frozenset(
    {"tool-return", "retry-prompt", "retry-feedback", "builtin-tool-return", "tool-search-return"}
)
_BOOKKEEPING_KINDS = frozenset(
    {
        "tool-availability-delta",
        "capability-load-delta",
        "model-settings-delta",
        "instruction-delta",
        "instruction-baseline",
        "capability",
    }
)
"""Parts Pydantic AI records beside a request's content; they do not make its role."""


class StoredFormError(ValueError):
    """A stored message that is not a Pydantic AI message this version can read."""


def is_pydantic_ai(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get(KEY), dict)


def to_stored(payload: dict[str, Any]) -> dict[str, Any]:
    """The stored form of one message in Pydantic AI's JSON form (not modified)."""
    parts = payload.get("parts")
    if not isinstance(parts, list):
        raise StoredFormError("a Pydantic AI message has a list of parts")
    content: list[dict[str, Any]] = []
    kept = []
    for index, part in enumerate(parts):
        kept.append(_move_text(part, index, content))
    message = dict(payload, parts=kept)
    return {
        "role": role_of(payload.get("kind"), parts),
        "content": content,
        KEY: {"format": FORMAT, "message": message},
    }


def from_stored(stored: dict[str, Any]) -> dict[str, Any]:
    """Pydantic AI's JSON form of a stored message (``stored`` is not modified)."""
    envelope = stored.get(KEY)
    if not isinstance(envelope, dict):
        raise StoredFormError("not a Pydantic AI message")
    if envelope.get("format") != FORMAT:
        raise StoredFormError(
            f"stored in format {envelope.get('format')!r}; this version reads format {FORMAT}"
        )
    message = envelope.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise StoredFormError("a stored Pydantic AI message has a message with parts")
    parts: list[Any] = list(message["parts"])
    copied: set[int] = set()
    for text in stored.get("content") or ():
        index = text.get("part") if isinstance(text, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(parts):
            continue
        if index not in copied:
            part = dict(parts[index])
            if isinstance(part.get("content"), list):
                part["content"] = list(part["content"])
            parts[index] = part
            copied.add(index)
        item = text.get("item")
        if item is None:
            parts[index]["content"] = text["text"]
        else:
            parts[index]["content"][item] = text["text"]
    return dict(message, parts=parts)


def role_of(kind: object, parts: list[Any]) -> str:
    """The role a stored message is listed and coloured with."""
    if kind == "response":
        return "assistant"
    kinds = {part.get("part_kind") for part in parts if isinstance(part, dict)}
    kinds -= _BOOKKEEPING_KINDS
    if "user-prompt" in kinds or "speech" in kinds:
        return "user"
    if kinds and kinds <= _TOOL_RESULT_KINDS:
        return "tool"
    if "system-prompt" in kinds:
        return "system"
    return "user"


def stored_run_id(stored: Any) -> str | None:
    """The Pydantic AI run id a stored message was written by, if it is one."""
    if not is_pydantic_ai(stored):
        return None
    message = stored[KEY].get("message")
    run_id = message.get("run_id") if isinstance(message, dict) else None
    return run_id if isinstance(run_id, str) else None


def _move_text(part: Any, index: int, content: list[dict[str, Any]]) -> Any:
    if not isinstance(part, dict):
        return part
    value = part.get("content")
    if isinstance(value, str):
        content.append({"type": "text", "text": value, "part": index})
        return {key: item for key, item in part.items() if key != "content"}
    if isinstance(value, list) and any(isinstance(item, str) for item in value):
        items: list[Any] = []
        for position, item in enumerate(value):
            if isinstance(item, str):
                content.append({"type": "text", "text": item, "part": index, "item": position})
                items.append(None)
            else:
                items.append(item)
        return dict(part, content=items)
    return part
