"""Small helpers for calling the inspector API in tests."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.test import APIClient

_NEXT = re.compile(r'^<([^>]+)>; rel="next"$')

LIST_URL = "/anvia/api/conversations/"


def detail_url(ref: str) -> str:
    return f"/anvia/api/conversations/{ref}/"


def messages_url(ref: str) -> str:
    return f"/anvia/api/conversations/{ref}/messages/"


def next_url(response: Any) -> str | None:
    """The ``rel="next"`` target of a response's Link header, if any."""
    header = response.headers.get("Link")
    if header is None:
        return None
    match = _NEXT.match(header)
    assert match is not None, f"malformed Link header: {header!r}"
    return match.group(1)


def follow_all(client: APIClient, url: str) -> list[list[dict[str, Any]]]:
    """Every page, following Link headers until there is none."""
    pages = []
    next_page: str | None = url
    while next_page is not None:
        response = client.get(next_page)
        assert response.status_code == 200, response.content
        pages.append(response.json())
        next_page = next_url(response)
    return pages
