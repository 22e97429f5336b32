"""LangGraph's threads in the inspector API, read-only; routed only when
LangGraph is installed (decoding needs its serializer), as the admin's page.

- ``api/langgraph/threads/``: threads, newest checkpoint first (``limit``,
  ``cursor``, ``threadId``)
- ``api/langgraph/threads/<thread id>/``: its checkpoints, newest first
  (``limit``, ``cursor``)
- ``api/langgraph/threads/<thread id>/checkpoints/<checkpoint id>/``: one
  checkpoint decoded (``checkpointNs``)

The same permissions, throttle, renderers, errors and ``Link`` paging as
the conversations; the queries are ``integrations/langgraph/threads.py``'s.
"""

from __future__ import annotations

from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.integrations.langgraph.decoding import shown_checkpoint
from anvia_django.integrations.langgraph.threads import (
    CheckpointKey,
    ThreadKey,
    checkpoint_row,
    history_page,
    thread_page,
)
from anvia_django.persistence import unopenable_errors
from anvia_django.tenants import visible_tenants

from .cursors import (
    decode_checkpoint_cursor,
    decode_thread_cursor,
    encode_checkpoint_cursor,
    encode_thread_cursor,
)
from .link_header import next_link
from .openapi import documented
from .owners import visibility
from .params import identifier_param
from .thread_serializers import (
    LangGraphCheckpointSerializer,
    LangGraphThreadHistorySerializer,
    LangGraphThreadSerializer,
)
from .views import UNREADABLE_STATUS, InspectorViewSet, unreadable_record

THREAD_QUERY_PARAMS: dict[str, frozenset[str]] = {
    "list": frozenset({"limit", "cursor", "threadId"}),
    "retrieve": frozenset({"limit", "cursor"}),
    "checkpoint": frozenset({"checkpointNs"}),
}


class LangGraphThreadViewSet(InspectorViewSet):
    """LangGraph threads stored by `DjangoSaver`, and their checkpoints; nothing here writes.

    Lists page forwards: follow the `Link: rel="next"` header (in a browser,
    the "Next page" link).
    """

    # A thread id holding "/" is listed but has no page of its own.
    lookup_field = "thread_id"
    view_permission_models = {None: ("langgraphcheckpoint",)}
    known_query_params = THREAD_QUERY_PARAMS

    def get_view_name(self) -> str:
        # By the route's suffix, which the browsable API's breadcrumbs set too.
        names = {"List": "LangGraph threads", "Instance": "LangGraph thread"}
        return names.get(getattr(self, "suffix", None) or "", "LangGraph checkpoint")

    @documented("langgraph-threads")
    def list(self, request: Request) -> Response:
        limit = self._limit(request)
        token = request.query_params.get("cursor")
        after = ThreadKey(*decode_thread_cursor(token)) if token is not None else None
        thread_id = identifier_param(request, "threadId")
        scope = visibility(request)
        if scope.nothing:
            return Response([])
        page = thread_page(
            limit,
            tenants=visible_tenants(request),
            owner=scope.user_id,
            thread_id=thread_id,
            after=after,
        )
        headers = {}
        if page.next_key is not None:
            key = page.next_key
            cursor = encode_thread_cursor(key.latest_checkpoint_id, key.thread_id)
            headers["Link"] = next_link(request, cursor=cursor)
        return Response(LangGraphThreadSerializer(page.items, many=True).data, headers=headers)

    @documented("langgraph-thread")
    def retrieve(self, request: Request, thread_id: str) -> Response:
        limit = self._limit(request)
        token = request.query_params.get("cursor")
        after = CheckpointKey(*decode_checkpoint_cursor(token)) if token is not None else None
        scope = visibility(request)
        page = None
        if not scope.nothing and _storable(thread_id):
            page = history_page(
                thread_id,
                limit,
                tenants=visible_tenants(request),
                owner=scope.user_id,
                after=after,
            )
        if page is None or not page.items:
            raise NotFound("No such thread.")
        headers = {}
        if page.next_key is not None:
            key = page.next_key
            cursor = encode_checkpoint_cursor(key.checkpoint_id, key.checkpoint_ns)
            headers["Link"] = next_link(request, cursor=cursor)
        data = {"thread_id": thread_id, "checkpoints": page.items}
        return Response(LangGraphThreadHistorySerializer(data).data, headers=headers)

    @documented("langgraph-checkpoint")
    @action(detail=True, methods=["get"], url_path=r"checkpoints/(?P<checkpoint_id>[^/]+)")
    def checkpoint(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        # "" (or no parameter): the graph's own namespace.
        checkpoint_ns = ""
        if request.query_params.get("checkpointNs"):
            checkpoint_ns = identifier_param(request, "checkpointNs") or ""
        scope = visibility(request)
        found = None
        if not scope.nothing and _storable(thread_id) and _storable(checkpoint_id):
            found = checkpoint_row(
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                tenants=visible_tenants(request),
                owner=scope.user_id,
            )
        if found is None:
            raise NotFound("No such checkpoint.")
        summary, stored = found
        shown = shown_checkpoint(summary, stored)
        return Response(LangGraphCheckpointSerializer(shown).data)

    def handle_exception(self, exc: Exception) -> Response:
        # A value that does not open (encryption at rest: altered, or its
        # thread's key gone): the documented JSON error, never its content.
        if not isinstance(exc, unopenable_errors()):
            return super().handle_exception(exc)
        body = unreadable_record("value", None, type(exc).__name__, of="checkpoint")
        response = Response(body, status=UNREADABLE_STATUS)
        response.exception = True
        return response


def _storable(value: str) -> bool:
    """Whether ``value`` can be a stored id: a malformed one (empty, too
    long, holding NUL) is no thread's, a 404 as for a malformed ref."""
    try:
        validate_identifier(value, "id", app_settings.input_limits, optional=False)
    except InvalidMemoryInputError:
        return False
    return True
