"""A conversation as text an operator can read in a terminal."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from anvia_django.core.memory.types import MemoryConversation, MemoryConversationMessage

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Control characters shown as escapes, so stored chat content cannot
    drive the operator's terminal (move the cursor, rewrite lines, set the
    clipboard). Newlines and tabs stay."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_transcript(conversation: MemoryConversation) -> Iterator[str]:
    yield f"Session   {conversation.session_id}"
    yield f"Ref       {conversation.ref}"
    yield f"User      {conversation.user_id or '-'}"
    if conversation.metadata:
        yield f"Metadata  {_compact(conversation.metadata)}"
    yield f"Created   {conversation.created_at.isoformat()}"
    yield f"Updated   {conversation.updated_at.isoformat()}"
    yield f"Messages  {conversation.message_count}"
    run_id = None
    for entry in conversation.messages:
        if entry.run_id != run_id:
            run_id = entry.run_id
            yield ""
            yield f"--- run {run_id} ({entry.created_at.isoformat()})"
        yield from render_message(entry)


def render_message(entry: MemoryConversationMessage) -> Iterator[str]:
    message = entry.message
    role = str(message.get("role", "?"))
    label = f"[{entry.position}] turn {entry.turn} {role}"
    if role == "tool":
        label += f" {message.get('name', '?')} (call {message.get('tool_call_id', '?')})"
    text = content_text(message.get("content"))
    yield f"{label}: {text}" if text else label
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            arguments = _compact(call.get("arguments", {}))
            yield f"    -> {call.get('name', '?')}({arguments}) [call {call.get('id', '?')}]"


def content_text(content: Any) -> str:
    """Text content as is, the text parts of multi-part content, else JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(part, dict) and isinstance(part.get("text"), str) for part in content
    ):
        return "".join(part["text"] for part in content)
    return _compact(content)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)
