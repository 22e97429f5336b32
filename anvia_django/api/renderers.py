"""How the inspector answers a browser: DRF's browsable page over the same JSON.

JSON clients are unaffected: JSON is the first renderer, so a request
without ``Accept`` (or with ``*/*``) gets exactly the JSON it always got.
A browser asks for ``text/html`` first and gets the browsable page, where
the ``Link: rel="next"`` header becomes a link it can follow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer

from .link_header import PAGE_PARAMS

_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True, slots=True)
class LinkPager:
    """DRF's pager slot filled from the ``Link`` header: the lists page
    forwards only (keyset cursors), so there is "first" and "next"."""

    next_url: str | None
    first_url: str | None
    display_page_controls: bool = True

    def to_html(self) -> str:
        return render_to_string(
            "anvia_django/api/pager.html",
            {"next_url": self.next_url, "first_url": self.first_url},
        )


def next_page_url(link_header: str | None) -> str | None:
    match = _NEXT.search(link_header or "")
    return match.group(1) if match else None


class InspectorBrowsableAPIRenderer(BrowsableAPIRenderer):
    def get_default_renderer(self, view: Any) -> BaseRenderer:
        # The page shows the JSON a client would get, also on views whose
        # own renderer is YAML or a template (the schema and docs pages).
        return JSONRenderer()

    def get_context(
        self, data: Any, accepted_media_type: str | None, renderer_context: Mapping[str, Any]
    ) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context(data, accepted_media_type, renderer_context)
        response = renderer_context["response"]
        request = renderer_context["request"]
        next_url = next_page_url(response.headers.get("Link"))
        paged = any(name in request.query_params for name in PAGE_PARAMS)
        if next_url is not None or paged:
            first = request.query_params.copy()
            for name in PAGE_PARAMS:
                first.pop(name, None)
            first_url = f"{request.path}?{first.urlencode()}" if first else request.path
            context["paginator"] = LinkPager(next_url, first_url if paged else None)
        return context


READABLE_RENDERERS: list[type[BaseRenderer]] = [JSONRenderer, InspectorBrowsableAPIRenderer]
"""What every inspector view speaks, errors included: JSON, then HTML."""


class MediaRenderer(BaseRenderer):
    """Lets the media endpoint answer any ``Accept`` (an ``<img>`` asks for
    ``image/*``): the view returns its bytes itself; errors still answer in
    JSON or HTML (``ReadableErrorsMixin``)."""

    media_type = "*/*"
    format = "media"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return b"" if data is None else bytes(data)
