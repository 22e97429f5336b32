"""Stored Pydantic AI messages for readers: the admin's transcript and the API.

Works on the stored JSON alone (no Pydantic AI needed). Each part becomes a
:class:`ShownPart`: text as text, tool calls with their arguments, tool
returns, retries, thinking (to be shown collapsed), and binary content as a
:class:`Media` reference that a page links to or shows as a thumbnail,
never as inline data.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from .stored_form import KEY, StoredFormError, from_stored, is_pydantic_ai

INLINE_DATA_LIMIT = 2048
"""Base64 characters of binary data the API still returns inline."""

THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types a browser may be sent inline: raster formats that cannot carry script."""


@dataclass(frozen=True, slots=True)
class Media:
    """Binary content of a part: ``part`` index, and ``item`` in its content list."""

    part: int
    item: int | None
    media_type: str
    size: int
    """Decoded bytes."""

    @property
    def is_thumbnail(self) -> bool:
        return self.media_type in THUMBNAIL_TYPES


@dataclass(frozen=True, slots=True)
class ShownPart:
    kind: str
    """``text``, ``thinking``, ``tool-call``, ``tool-return``, ``retry``,
    ``system``, ``media``, ``link``, ``compaction`` or ``other``."""
    label: str
    text: str | None = None
    json: str | None = None
    media: Media | None = None
    url: str | None = None
    collapsed: bool = False


def shown_parts(stored: Any) -> list[ShownPart] | None:
    """The parts of a stored Pydantic AI message, or ``None`` for any other message."""
    if not is_pydantic_ai(stored):
        return None
    try:
        message = from_stored(stored)
    except StoredFormError as error:
        return [ShownPart("other", "unreadable Pydantic AI message", text=str(error))]
    shown: list[ShownPart] = []
    for index, part in enumerate(message["parts"]):
        if isinstance(part, dict):
            shown.extend(_shown(index, part))
    return shown


def message_details(stored: Any) -> dict[str, Any]:
    """The message's fields besides its parts (usage, model, timestamps, ids)."""
    message = stored[KEY].get("message") or {}
    return {key: value for key, value in message.items() if key != "parts" and value is not None}


def without_inline_media(stored: Any, media_url: Any) -> Any:
    """``stored`` with every binary ``data`` longer than ``INLINE_DATA_LIMIT``
    replaced by ``null`` beside ``dataOmitted`` (its size in bytes) and
    ``dataUrl`` (``media_url(part, item)``); other messages as they are."""
    if not is_pydantic_ai(stored):
        return stored
    envelope = stored[KEY]
    message = envelope.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return stored
    parts = [
        _omit_in_part(part, index, media_url) if isinstance(part, dict) else part
        for index, part in enumerate(message["parts"])
    ]
    return {**stored, KEY: {**envelope, "message": {**message, "parts": parts}}}


def with_media_sizes(value: Any) -> Any:
    """``value`` (a stored message, or a list of them) with the long binary
    data of Pydantic AI messages replaced by its size, for a JSON view."""
    if isinstance(value, list):
        return [with_media_sizes(item) for item in value]
    return _scrubbed(value) if is_pydantic_ai(value) else value


def binary_content(stored: Any, part: int, item: int | None) -> tuple[str, bytes] | None:
    """The media type and bytes of the binary content ``part``/``item`` of a stored message."""
    if not is_pydantic_ai(stored):
        return None
    try:
        parts = from_stored(stored)["parts"]
    except StoredFormError:
        return None
    if not 0 <= part < len(parts) or not isinstance(parts[part], dict):
        return None
    for index, binary in _binaries(parts[part]):
        if index == item:
            data = _decode(binary.get("data"))
            if data is None:
                return None
            return str(binary.get("media_type") or "application/octet-stream"), data
    return None


def _shown(index: int, part: dict[str, Any]) -> list[ShownPart]:
    kind = part.get("part_kind")
    content = part.get("content")
    if kind == "system-prompt":
        return [ShownPart("system", "system prompt", text=_text(content))]
    if kind == "user-prompt":
        if isinstance(content, list):
            return [_user_item(index, position, item) for position, item in enumerate(content)]
        return [ShownPart("text", "user prompt", text=_text(content))]
    if kind == "text":
        return [ShownPart("text", "text", text=_text(content))]
    if kind == "thinking":
        return [ShownPart("thinking", "thinking", text=_text(content), collapsed=True)]
    if kind in ("tool-call", "builtin-tool-call"):
        label = (
            f"{'built-in ' if kind == 'builtin-tool-call' else ''}tool call {part.get('tool_name')}"
        )
        return [ShownPart("tool-call", _with_id(label, part), json=_arguments(part.get("args")))]
    if kind in ("tool-return", "builtin-tool-return"):
        return [_tool_return(kind, part)]
    if kind in ("retry-prompt", "retry-feedback"):
        label = "retry prompt" + (f" for {part['tool_name']}" if part.get("tool_name") else "")
        return [_text_or_json("retry", label, content)]
    if kind == "compaction":
        return [ShownPart("compaction", "compaction summary", text=_text(content), collapsed=True)]
    if kind in ("file", "speech"):
        shown = (
            [ShownPart("text", "speech", text=part["transcript"])] if part.get("transcript") else []
        )
        shown.extend(_media(index, item, binary, kind) for item, binary in _binaries(part))
        return shown
    fields = {key: value for key, value in part.items() if key != "part_kind"}
    return [ShownPart("other", str(kind), json=json_text(_scrubbed(fields)))]


def _user_item(index: int, position: int, item: Any) -> ShownPart:
    if isinstance(item, str):
        return ShownPart("text", "user prompt", text=item)
    if isinstance(item, dict) and item.get("kind") == "binary":
        return _media(index, position, item, "user prompt")
    if isinstance(item, dict) and isinstance(item.get("url"), str):
        url = item["url"]
        safe = url if url.startswith(("https://", "http://")) else None
        return ShownPart("link", str(item.get("kind", "url")), text=url, url=safe)
    return ShownPart("other", "user prompt", json=json_text(_scrubbed(item)))


def _tool_return(kind: str, part: dict[str, Any]) -> ShownPart:
    name = part.get("tool_name")
    outcome = part.get("outcome") or "success"
    if outcome == "retried":
        return _text_or_json(
            "retry", _with_id(f"retry prompt for {name}", part), part.get("content")
        )
    prefix = "built-in " if kind == "builtin-tool-return" else ""
    label = f"{prefix}tool return {name}" + ("" if outcome == "success" else f" ({outcome})")
    return _text_or_json("tool-return", _with_id(label, part), part.get("content"))


def _media(index: int, item: int | None, binary: dict[str, Any], label: str) -> ShownPart:
    media_type = str(binary.get("media_type") or "application/octet-stream")
    data = binary.get("data")
    size = _decoded_size(data) if isinstance(data, str) else 0
    return ShownPart("media", f"{label}: {media_type}", media=Media(index, item, media_type, size))


def _binaries(part: dict[str, Any]) -> list[tuple[int | None, dict[str, Any]]]:
    """The binary contents of a part, each with its index in the part's content list."""
    found: list[tuple[int | None, dict[str, Any]]] = []
    content = part.get("content")
    if isinstance(content, list):
        found.extend(
            (position, item)
            for position, item in enumerate(content)
            if isinstance(item, dict) and item.get("kind") == "binary"
        )
    elif isinstance(content, dict) and content.get("kind") == "binary":
        found.append((None, content))
    audio = part.get("audio")
    if isinstance(audio, dict) and audio.get("kind") == "binary":
        found.append((None, audio))
    return found


def _omit_in_part(part: dict[str, Any], index: int, media_url: Any) -> dict[str, Any]:
    copy = dict(part)
    for item, binary in _binaries(part):
        data = binary.get("data")
        if not isinstance(data, str) or len(data) <= INLINE_DATA_LIMIT:
            continue
        omitted = {
            **binary,
            "data": None,
            "dataOmitted": _decoded_size(data),
            "dataUrl": media_url(index, item),
        }
        if item is not None:
            copy["content"] = [omitted if i == item else v for i, v in enumerate(copy["content"])]
        elif part.get("content") is binary:
            copy["content"] = omitted
        else:
            copy["audio"] = omitted
    return copy


def _scrubbed(value: Any) -> Any:
    """``value`` with long base64 ``data`` strings replaced by their size."""
    if isinstance(value, dict):
        return {
            key: f"<{_decoded_size(item)} bytes>"
            if key == "data" and isinstance(item, str) and len(item) > INLINE_DATA_LIMIT
            else _scrubbed(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def _text_or_json(kind: str, label: str, content: Any) -> ShownPart:
    if isinstance(content, str):
        return ShownPart(kind, label, text=content)
    return ShownPart(kind, label, json=json_text(_scrubbed(content)))


def _arguments(args: Any) -> str:
    if isinstance(args, str):
        try:
            return json_text(json.loads(args))
        except ValueError:
            return args
    return json_text(args)


def _with_id(label: str, part: dict[str, Any]) -> str:
    call_id = part.get("tool_call_id")
    return f"{label} ({call_id})" if call_id else label


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json_text(content)


def _decode(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        # Pydantic AI writes bytes as URL-safe base64.
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return None


def _decoded_size(data: str) -> int:
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
