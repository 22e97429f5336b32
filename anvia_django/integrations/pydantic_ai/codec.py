"""Pydantic AI messages to stored messages and back.

The stored form is Pydantic AI's own JSON form of each message, wrapped as
:mod:`.stored_form` describes. Pydantic AI keeps that form loadable across
its releases (a deprecated part kind loads as what replaced it), and the
wrapper's ``format`` covers our side of it; ``tests/integrations/
pydantic_ai_format_1.json`` holds messages of every part kind as written
today, and the suite loads them on every run and with the newest release.

Loading goes through the same adapter, so what comes back is what
``ModelMessagesTypeAdapter`` gives for the same JSON: equal to what was
stored, except where Pydantic AI itself narrows a value on load (a
``BinaryContent`` of an image comes back as the equal ``BinaryImage``; bytes
returned by a tool, typed ``Any``, as their base64 text).

Messages written into the same session by another runtime (the store's
``{"role", "content"}`` shape) are read as the Pydantic AI messages they
describe; anything else is left out with a warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from anvia_django.core.memory.types import Message

from .stored_form import from_stored, is_pydantic_ai, to_stored

logger = logging.getLogger("anvia_django.integrations.pydantic_ai")


def messages_to_stored(messages: Sequence[ModelMessage]) -> list[Message]:
    """The stored form of each message, in order."""
    payloads = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return [to_stored(payload) for payload in payloads]


def stored_to_messages(stored: Sequence[Message]) -> list[ModelMessage]:
    """The Pydantic AI messages of a loaded history, in order."""
    payloads: list[dict[str, Any]] = []
    for position, message in enumerate(stored):
        if is_pydantic_ai(message):
            payloads.append(from_stored(message))
            continue
        foreign = _foreign_message(message)
        if foreign is None:
            logger.warning(
                "Left out message %d of the loaded history: role %r has no Pydantic AI form.",
                position,
                message.get("role"),
            )
            continue
        payloads.extend(ModelMessagesTypeAdapter.dump_python([foreign], mode="json"))
    return ModelMessagesTypeAdapter.validate_python(payloads)


def _foreign_message(message: Message) -> ModelMessage | None:
    """A message in the store's OpenAI-like shape as a Pydantic AI message."""
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else _text_of(content)
    if role == "user":
        return ModelRequest(parts=[UserPromptPart(text)])
    if role == "system":
        return ModelRequest(parts=[SystemPromptPart(text)])
    if role == "tool":
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name=str(message.get("name") or ""),
                    content=content,
                    tool_call_id=str(message.get("tool_call_id") or ""),
                )
            ]
        )
    if role == "assistant":
        parts: list[ModelResponsePart] = [TextPart(text)] if text else []
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                parts.append(
                    ToolCallPart(
                        str(call.get("name") or ""),
                        _arguments(call.get("arguments")),
                        tool_call_id=str(call.get("id") or ""),
                    )
                )
        return ModelResponse(parts=parts)
    return None


def _text_of(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def _arguments(arguments: Any) -> dict[str, Any] | str | None:
    if arguments is None or isinstance(arguments, dict | str):
        return arguments
    return json.dumps(arguments)
