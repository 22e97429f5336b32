"""The inspector's OpenAPI schema view (needs the ``openapi`` extra).

Mount it where you like::

    from anvia_django.api.schema import InspectorSchemaView

    path("anvia/api/schema/", InspectorSchemaView.as_view(), name="anvia-schema")

It documents the inspector endpoints only, whatever else the project routes,
and answers to the inspector's own permission classes.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from .permissions import authentication_classes, permission_classes
from .views import ConversationViewSet

DESCRIPTION = """Read-only access to the agent conversations stored by anvia-django.

Lists are plain JSON arrays; the next page, when there is one, is in an RFC 8288
`Link: <url>; rel="next"` response header."""


class InspectorSchemaGenerator(SchemaGenerator):
    def _initialise_endpoints(self) -> None:
        super()._initialise_endpoints()  # type: ignore[no-untyped-call]
        # Spectacular's endpoints are (path, regex, method, callback).
        endpoints = list(self.endpoints or [])
        self.endpoints = [endpoint for endpoint in endpoints if _is_inspector(endpoint[-1])]


class InspectorSchemaView(SpectacularAPIView):
    generator_class = InspectorSchemaGenerator
    custom_settings = {
        "TITLE": "anvia-django inspector API",
        "DESCRIPTION": DESCRIPTION,
        "VERSION": "1",
        "SCHEMA_PATH_PREFIX": r"/.*?/api",
    }

    def get_permissions(self) -> list[BasePermission]:
        return [permission() for permission in permission_classes()]

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [authenticator() for authenticator in authentication_classes()]


def _is_inspector(callback: Any) -> bool:
    view_class = getattr(callback, "cls", None)
    return isinstance(view_class, type) and issubclass(view_class, ConversationViewSet)
