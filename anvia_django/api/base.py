"""What every inspector view shares: access, renderers, readable errors.

Every policy is set on the views themselves, so the project's
``REST_FRAMEWORK`` defaults cannot loosen or reshape them.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from .params import refuse_unknown_params
from .permissions import authentication_classes, permission_classes
from .renderers import READABLE_RENDERERS
from .throttling import InspectorRateThrottle


class InspectorAccessMixin(APIView):
    """The inspector's permission, authentication and throttle classes, from settings."""

    def get_permissions(self) -> list[BasePermission]:
        return [permission() for permission in permission_classes()]

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [authenticator() for authenticator in authentication_classes()]

    def get_throttles(self) -> list[BaseThrottle]:
        return [InspectorRateThrottle()]


class KnownParamsMixin(APIView):
    """A query parameter an action does not read answers 400 naming it, so
    a misspelt filter never silently widens a list. An action not named in
    ``known_query_params`` (a subclass's own) is not checked; the actions of
    ``metadata_filter_actions`` also take each scope metadata key's filter."""

    known_query_params: dict[str, frozenset[str]] = {}
    metadata_filter_actions: frozenset[str] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication and permissions first
        action = getattr(self, "action", None) or ""
        known = self.known_query_params.get(action)
        if known is not None:
            with_metadata = action in self.metadata_filter_actions
            refuse_unknown_params(request, known, with_metadata=with_metadata)


class ReadableErrorsMixin(APIView):
    """An error answers in JSON or as the browsable page, whatever renderer
    the request chose: a 403 served as ``application/vnd.oai.openapi`` (the
    schema) or through a page template (Swagger UI) is unreadable, and a
    browser refuses to show it."""

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        chosen = getattr(request, "accepted_renderer", None)
        readable = isinstance(chosen, tuple(READABLE_RENDERERS))
        if getattr(response, "exception", False) and not readable:
            request.accepted_renderer, request.accepted_media_type = readable_renderer(request)
        return super().finalize_response(request, response, *args, **kwargs)


def readable_renderer(request: Request) -> tuple[BaseRenderer, str]:
    renderers = [renderer() for renderer in READABLE_RENDERERS]
    try:
        renderer, media_type = DefaultContentNegotiation().select_renderer(request, renderers)
    except (NotAcceptable, Http404):  # an Accept or ?format= neither can serve
        return JSONRenderer(), JSONRenderer.media_type
    return renderer, media_type
