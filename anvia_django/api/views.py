"""The read-only inspector viewset.

Every policy is set on the view itself (renderers, parsers, permissions,
pagination, filtering), so the project's ``REST_FRAMEWORK`` defaults cannot
loosen or reshape it. Authentication follows ``INSPECTOR_AUTHENTICATION_CLASSES``
or, by default, the project's DRF authentication classes.
"""

from __future__ import annotations

from typing import Any

from rest_framework import viewsets
from rest_framework.authentication import BaseAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from anvia_django.conf import app_settings
from anvia_django.core.memory.types import MemoryConversation
from anvia_django.persistence import (
    FoundConversation,
    conversation_lineage,
    find_conversation,
    list_conversation_page,
    list_message_page,
    list_runs,
    list_summaries,
    run_totals,
    search_conversation_page,
    search_message_page,
)

from .cursors import decode_cursor, encode_cursor
from .openapi import documented, view_schema
from .owners import visibility
from .pagination import next_link
from .params import after_param, identifier_param, limit_param, search_param, user_id_param
from .permissions import authentication_classes, permission_classes
from .serializers import (
    ConversationMessageSerializer,
    ConversationRunsSerializer,
    ConversationSerializer,
    ConversationSummarySerializer,
    LineageSerializer,
    SummarySerializer,
)


class ConversationViewSet(viewsets.ViewSet):
    """Stored conversations and their messages; nothing here writes."""

    lookup_field = "ref"
    # Any segment reaches the view, so a malformed ref answers a JSON 404.
    lookup_value_regex = "[^/]+"
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]
    pagination_class = None
    filter_backends: list[type[Any]] = []
    schema = view_schema()

    def get_permissions(self) -> list[BasePermission]:
        return [permission() for permission in permission_classes()]

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [authenticator() for authenticator in authentication_classes()]

    @documented("list")
    def list(self, request: Request) -> Response:
        limit = limit_param(
            request,
            default=app_settings.INSPECTOR_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MAX_LIMIT,
        )
        token = request.query_params.get("cursor")
        after = decode_cursor(token) if token is not None else None
        q = search_param(request)
        scope = visibility(request, user_id_param(request))
        if scope.nothing:
            return Response([])
        if q is None:
            page = list_conversation_page(limit, scope.user_id, after=after)
        else:
            page = search_conversation_page(q, limit, scope.user_id, after=after)
        headers = {}
        if page.next_key is not None:
            headers["Link"] = next_link(request, cursor=encode_cursor(page.next_key))
        return Response(ConversationSummarySerializer(page.items, many=True).data, headers=headers)

    @documented("retrieve")
    def retrieve(self, request: Request, ref: str) -> Response:
        found = self._find(request, ref)
        limit = app_settings.INSPECTOR_MESSAGES_DEFAULT_LIMIT
        page = list_message_page(found.id, limit=limit)
        summary = found.summary
        conversation = MemoryConversation.from_summary(summary, page.items)
        headers = {}
        if page.next_after is not None:
            path = self.reverse_action("messages", kwargs={"ref": summary.ref})
            headers["Link"] = next_link(request, path, after=page.next_after, limit=limit)
        return Response(ConversationSerializer(conversation).data, headers=headers)

    @documented("messages")
    @action(detail=True, methods=["get"])
    def messages(self, request: Request, ref: str) -> Response:
        limit = limit_param(
            request,
            default=app_settings.INSPECTOR_MESSAGES_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MESSAGES_MAX_LIMIT,
        )
        after = after_param(request)
        q = search_param(request)
        found = self._find(request, ref)
        if q is None:
            page = list_message_page(found.id, after=after, limit=limit)
        else:
            page = search_message_page(found.id, q, after=after, limit=limit)
        headers = {}
        if page.next_after is not None:
            headers["Link"] = next_link(request, after=page.next_after)
        return Response(ConversationMessageSerializer(page.items, many=True).data, headers=headers)

    @documented("runs")
    @action(detail=True, methods=["get"])
    def runs(self, request: Request, ref: str) -> Response:
        limit = limit_param(
            request,
            default=app_settings.INSPECTOR_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MAX_LIMIT,
        )
        run_id = identifier_param(request, "runId")
        found = self._find(request, ref)
        data = {
            "totals": run_totals(found.id),
            "runs": list_runs(found.id, limit=limit, run_id=run_id),
        }
        return Response(ConversationRunsSerializer(data).data)

    @documented("lineage")
    @action(detail=True, methods=["get"])
    def lineage(self, request: Request, ref: str) -> Response:
        limit = limit_param(
            request,
            default=app_settings.INSPECTOR_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MAX_LIMIT,
        )
        found = self._find(request, ref)
        user_id = visibility(request).user_id
        lineage = conversation_lineage(found.id, user_id=user_id, limit=limit)
        return Response(LineageSerializer(lineage).data)

    @documented("summaries")
    @action(detail=True, methods=["get"])
    def summaries(self, request: Request, ref: str) -> Response:
        limit = limit_param(
            request,
            default=app_settings.INSPECTOR_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MAX_LIMIT,
        )
        found = self._find(request, ref)
        records = list_summaries(found.id, limit=limit)
        return Response(SummarySerializer(records, many=True).data)

    def _find(self, request: Request, ref: str) -> FoundConversation:
        scope = visibility(request)
        found = None if scope.nothing else find_conversation(ref, scope.user_id)
        if found is None:
            raise NotFound("No such conversation.")
        return found
