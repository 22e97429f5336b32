"""RFC 8288 ``Link: <...>; rel="next"`` headers.

The bodies stay the contract's plain JSON arrays; the way to the next page
travels in the header, as GitHub's API does.
"""

from __future__ import annotations

from urllib.parse import urlencode

from rest_framework.request import Request

PAGE_PARAMS = ("cursor", "after")
"""The query parameters that move a list past its first page."""


def next_link(request: Request, path: str | None = None, **params: str | int | None) -> str:
    """The ``Link`` header value for ``path`` (default: this request's path)
    with this request's query, ``params`` replacing (``None``: dropping) keys."""
    query = request.query_params.copy()
    for name, value in params.items():
        query.pop(name, None)
        if value is not None:
            query[name] = str(value)
    url = request.build_absolute_uri(path or request.path)
    if query:
        url = f"{url}?{urlencode(sorted(query.lists()), doseq=True)}"
    return f'<{url}>; rel="next"'
