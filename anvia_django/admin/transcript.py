"""A page of stored messages shaped for reading, not for editing.

A message's text is shown as text; tool calls, structured tool results and
any other fields as indented JSON; an ADK event's author, state delta and
the whole event each in a block of its own
(:mod:`anvia_django.integrations.adk.stored_form`). A Pydantic AI message is shown part by
part (:mod:`anvia_django.integrations.pydantic_ai.display`), its binary
content as links or thumbnails to ``media_url(position, media)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from anvia_django.core.memory.types import MemoryConversationMessage
from anvia_django.integrations.adk.stored_form import SHOWN_APART, shown_apart
from anvia_django.integrations.pydantic_ai.display import (
    Media,
    ShownPart,
    message_details,
    shown_parts,
)
from anvia_django.persistence import UnreadableMessage

_SHOWN_AS_TEXT_OR_BLOCK = ("role", "content", "tool_calls")


@dataclass(frozen=True, slots=True)
class Block:
    label: str
    json: str
    collapsed: bool = False
    """Shown closed until opened (always, in a message shown part by part)."""


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    position: int
    role: str
    run_id: str
    turn: int
    created_at: datetime
    text: str | None
    blocks: list[Block]
    starts_run: bool
    """True for the first entry of the page and wherever the run changes."""
    run_url: str | None = None
    """The run record's admin page, when the reader may see it."""
    parts: list[tuple[ShownPart, str | None]] = field(default_factory=list)
    """A Pydantic AI message's parts, each with its media URL (if it has media)."""
    unreadable: str | None = None
    """The class of the error opening the message raised, when it does not open."""
    message_id: int | None = None
    """The message's row id, given with ``unreadable``."""


MediaUrl = Callable[[int, Media], str]
"""The URL of a message's media: (the message's position, the media) -> URL."""


def transcript_entries(
    messages: Sequence[MemoryConversationMessage | UnreadableMessage],
    media_url: MediaUrl | None = None,
) -> list[TranscriptEntry]:
    entries = []
    previous_run: str | None = None
    for item in messages:
        if isinstance(item, UnreadableMessage):
            entries.append(_unreadable_entry(item, starts_run=item.run_id != previous_run))
            previous_run = item.run_id
            continue
        message = item.message
        parts = shown_parts(message)
        shown: list[tuple[ShownPart, str | None]] = []
        if parts is not None:
            text, blocks = None, [Block("details", json_text(message_details(message)))]
            shown = [
                (part, media_url(item.position, part.media) if part.media and media_url else None)
                for part in parts
            ]
        else:
            text, blocks = _content(message.get("content"))
            if message.get("tool_calls") is not None:
                blocks.append(Block("tool calls", json_text(message["tool_calls"])))
            adk = shown_apart(message)
            apart = _SHOWN_AS_TEXT_OR_BLOCK + (SHOWN_APART if adk else ())
            extra = {k: v for k, v in message.items() if k not in apart}
            if extra:
                blocks.append(Block("fields", json_text(extra)))
            blocks += [
                Block(label, json_text(value), collapsed=label == "ADK event")
                for label, value in adk or ()
            ]
        entries.append(
            TranscriptEntry(
                position=item.position,
                role=str(message.get("role", "")),
                run_id=item.run_id,
                turn=item.turn,
                created_at=item.created_at,
                text=text,
                blocks=blocks,
                starts_run=item.run_id != previous_run,
                parts=shown,
            )
        )
        previous_run = item.run_id
    return entries


def _unreadable_entry(item: UnreadableMessage, *, starts_run: bool) -> TranscriptEntry:
    # Its role is sealed with the rest of it: only its place is known.
    return TranscriptEntry(
        position=item.position,
        role="unreadable",
        run_id=item.run_id,
        turn=item.turn,
        created_at=item.created_at,
        text=None,
        blocks=[],
        starts_run=starts_run,
        unreadable=item.error_type,
        message_id=item.id,
    )


def _content(content: Any) -> tuple[str | None, list[Block]]:
    if content is None:
        return None, []
    if isinstance(content, str):
        return content, []
    if isinstance(content, list) and all(_is_text_part(part) for part in content):
        return "\n".join(part["text"] for part in content), []
    return None, [Block("content", json_text(content))]


def _is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
