"""Serving the binary content of a stored Pydantic AI message (admin and API).

The bytes are sent as what they claim to be only for raster images a
browser may show inline (``display.THUMBNAIL_TYPES``); anything else, an
SVG or HTML "image" included, is a download of ``application/octet-stream``,
so stored content can never run as a page of this site.
"""

from __future__ import annotations

from django.http import HttpResponse

from anvia_django.persistence import list_message_page

from .display import THUMBNAIL_TYPES, binary_content


def media_response(
    conversation_id: int, position: int, part: int, item: str | None
) -> HttpResponse | None:
    """The bytes of the media ``part`` (``item``: index in its content list)
    of the message at ``position``; ``None`` when there is none."""
    if item is not None and not (item.isdigit() and len(item) < 6):
        return None
    index = None if item is None else int(item)
    after = position - 1 if position > 0 else None
    page = list_message_page(conversation_id, after=after, limit=1)
    found = [m for m in page.items if m.position == position]
    media = binary_content(found[0].message, part, index) if found else None
    if media is None:
        return None
    media_type, data = media
    inline = media_type in THUMBNAIL_TYPES
    response = HttpResponse(data, content_type=media_type if inline else "application/octet-stream")
    disposition = "inline" if inline else "attachment"
    response["Content-Disposition"] = f'{disposition}; filename="message-{position}-part-{part}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response
