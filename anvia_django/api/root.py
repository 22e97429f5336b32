"""``GET anvia/api/``: where the inspector's endpoints are, as links."""

from __future__ import annotations

import importlib.util

from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from .base import InspectorAccessMixin, ReadableErrorsMixin
from .openapi import spectacular_available
from .renderers import READABLE_RENDERERS

NAMESPACE = "anvia_django"


class InspectorRootView(InspectorAccessMixin, ReadableErrorsMixin, APIView):
    """The anvia-django inspector: read-only access to stored agent conversations.

    Follow `conversations` to browse (and `langgraphThreads`, with LangGraph
    installed); with drf-spectacular installed, `schema`
    is the OpenAPI document and `swaggerUi` and `redoc` render it.
    """

    renderer_classes = READABLE_RENDERERS
    parser_classes = [JSONParser]
    schema = None  # not an endpoint of the documented API

    def get_view_name(self) -> str:
        return "Inspector API"

    def get(self, request: Request) -> Response:
        names = {"conversations": "conversation-list"}
        if langgraph_available():
            names["langgraphThreads"] = "langgraph-thread-list"
        if spectacular_available():
            names.update(schema="schema", swaggerUi="swagger-ui", redoc="redoc")
        current = request.resolver_match.namespace if request.resolver_match else NAMESPACE
        return Response(
            {key: reverse(f"{current}:{name}", request=request) for key, name in names.items()}
        )


def langgraph_available() -> bool:
    """Whether LangGraph is installed (the ``langgraph`` extra): its threads
    are routed and linked only then."""
    return importlib.util.find_spec("langgraph") is not None
