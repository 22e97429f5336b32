"""Page numbers for a transcript, turned into position ranges.

Positions are 0, 1, 2, ... without gaps (SPEC invariant 1), so page n starts
after position (n - 1) * size - 1 and the stored message count gives the
number of pages: every page is one indexed range query, never an OFFSET.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from django.http import HttpRequest

PAGE_PARAM = "page"
MAX_PAGE_DIGITS = 18


@dataclass(frozen=True, slots=True)
class TranscriptPage:
    number: int
    count: int
    size: int
    message_count: int
    base_query: str
    """The request's query string without ``page``, for building links."""

    @property
    def after(self) -> int | None:
        return None if self.number == 1 else (self.number - 1) * self.size - 1

    @property
    def first_position(self) -> int:
        return (self.number - 1) * self.size

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.count

    def url(self, number: int) -> str:
        query = f"{self.base_query}&" if self.base_query else ""
        return f"?{query}{PAGE_PARAM}={number}"

    @property
    def previous_url(self) -> str:
        return self.url(self.number - 1)

    @property
    def next_url(self) -> str:
        return self.url(self.number + 1)

    @property
    def first_url(self) -> str:
        return self.url(1)

    @property
    def last_url(self) -> str:
        return self.url(self.count)


def requested_page(raw: str) -> int:
    """The page number asked for, as Django's ``Paginator.get_page`` reads it:
    anything but a whole number is page 1, and the caller clamps a number
    past the end to the last page.

    ``str.isdigit`` alone would let through digits ``int`` refuses
    (superscripts such as "²", other scripts' digits) and numbers of
    thousands of digits, which ``int`` refuses too: both were a 500.
    """
    if not (raw.isascii() and raw.isdigit()):
        return 1
    significant = raw.lstrip("0")
    # Longer than any page count can be: the last page, without converting.
    if len(significant) > MAX_PAGE_DIGITS:
        return sys.maxsize
    return int(significant or "0")


def transcript_page(request: HttpRequest, message_count: int, size: int) -> TranscriptPage:
    count = max(1, -(-message_count // size))
    number = requested_page(request.GET.get(PAGE_PARAM, "1"))
    query = request.GET.copy()
    query.pop(PAGE_PARAM, None)
    return TranscriptPage(
        number=min(max(number, 1), count),
        count=count,
        size=size,
        message_count=message_count,
        base_query=query.urlencode(),
    )
