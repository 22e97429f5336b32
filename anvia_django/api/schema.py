"""The inspector's OpenAPI schema view (needs the ``openapi`` extra).

``anvia_django.urls`` mounts it at ``api/schema/`` when drf-spectacular is
installed; mount it elsewhere as well if you like::

    from anvia_django.api.schema import InspectorSchemaView

    path("anvia/api/schema/", InspectorSchemaView.as_view(), name="anvia-schema")

It documents the inspector endpoints only, whatever else the project routes,
and answers to the inspector's own permission classes.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView

from .base import InspectorAccessMixin, ReadableErrorsMixin
from .views import InspectorViewSet

DESCRIPTION = """Read-only access to the agent conversations stored by anvia-django
(and LangGraph's threads, when LangGraph is installed).

Lists are plain JSON arrays (runs and lineage: the objects shown); the next
page, when there is one, is in an RFC 8288 `Link: <url>; rel="next"` response
header."""


class InspectorSchemaGenerator(SchemaGenerator):
    def _initialise_endpoints(self) -> None:
        super()._initialise_endpoints()  # type: ignore[no-untyped-call]
        # Spectacular's endpoints are (path, regex, method, callback).
        endpoints = list(self.endpoints or [])
        self.endpoints = [endpoint for endpoint in endpoints if _is_inspector(endpoint[-1])]


class InspectorSchemaView(InspectorAccessMixin, ReadableErrorsMixin, SpectacularAPIView):
    generator_class = InspectorSchemaGenerator
    custom_settings = {
        "TITLE": "anvia-django inspector API",
        "DESCRIPTION": DESCRIPTION,
        "VERSION": "1",
        "SCHEMA_PATH_PREFIX": r"/.*?/api",
    }


def _is_inspector(callback: Any) -> bool:
    """The inspector's viewsets: conversations, and LangGraph's threads when installed."""
    view_class = getattr(callback, "cls", None)
    return isinstance(view_class, type) and issubclass(view_class, InspectorViewSet)
