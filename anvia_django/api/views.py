"""The read-only inspector viewset.

Every policy is set on the view itself (renderers, parsers, permissions,
pagination, filtering), so the project's ``REST_FRAMEWORK`` defaults cannot
loosen or reshape it. Authentication follows ``INSPECTOR_AUTHENTICATION_CLASSES``
or, by default, the project's DRF authentication classes.

Lists are plain JSON arrays (or the contract's objects); the next page is a
signed cursor in a ``Link: rel="next"`` header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.http import HttpResponse
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import MemoryConversation
from anvia_django.integrations.pydantic_ai.media import media_response
from anvia_django.persistence import (
    FoundConversation,
    UnreadableRecordError,
    find_conversation,
    lineage_page,
    list_conversation_page,
    list_message_page,
    list_run_page,
    list_summary_page,
    run_totals,
    search_conversation_page,
    search_message_page,
    unopenable_errors,
)
from anvia_django.tenants import visible_tenants

from .base import InspectorAccessMixin, KnownParamsMixin, ReadableErrorsMixin
from .cursors import (
    decode_cursor,
    decode_fork_cursor,
    decode_run_cursor,
    decode_summary_cursor,
    encode_cursor,
    encode_fork_cursor,
    encode_run_cursor,
    encode_summary_cursor,
)
from .link_header import next_link
from .openapi import documented, view_schema
from .owners import visibility
from .params import (
    KNOWN_QUERY_PARAMS,
    after_param,
    identifier_param,
    limit_param,
    metadata_filter_param,
    search_param,
    search_refused,
    user_id_param,
)
from .permissions import APP_LABEL
from .renderers import READABLE_RENDERERS, MediaRenderer
from .serializers import (
    ConversationMessageSerializer,
    ConversationRunsSerializer,
    ConversationSerializer,
    ConversationSummarySerializer,
    LineageSerializer,
    SummarySerializer,
)

K = TypeVar("K")


class InspectorViewSet(
    InspectorAccessMixin, ReadableErrorsMixin, KnownParamsMixin, viewsets.ViewSet
):
    """What every viewset of the inspector sets on itself: its renderers,
    parser, paging (its own: none of DRF's), filters (none) and schema."""

    # Any segment reaches the view, so a malformed id answers a JSON 404.
    lookup_value_regex = "[^/]+"
    renderer_classes = READABLE_RENDERERS
    parser_classes = [JSONParser]
    pagination_class = None
    filter_backends: list[type[Any]] = []
    schema = view_schema()

    def _limit(self, request: Request) -> int:
        return limit_param(
            request,
            default=app_settings.INSPECTOR_DEFAULT_LIMIT,
            maximum=app_settings.INSPECTOR_MAX_LIMIT,
        )


class ConversationViewSet(InspectorViewSet):
    """Stored conversations and their messages; nothing here writes.

    Lists page forwards: follow the `Link: rel="next"` header (in a browser,
    the "Next page" link).
    """

    lookup_field = "ref"
    # For AdminViewPermission: the models each action shows, as in the admin
    # (run records need their own view permission there too).
    view_permission_models = {None: ("conversation",), "runs": ("conversation", "agentrun")}
    # The query parameters each action reads (KnownParamsMixin).
    known_query_params = KNOWN_QUERY_PARAMS
    metadata_filter_actions = frozenset({"list"})

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
        metadata = metadata_filter_param(request)
        # Owner mode decides the user; metadata filters only narrow its rows.
        scope = visibility(request, user_id_param(request))
        if scope.nothing:
            return Response([])
        tenants = visible_tenants(request)
        if q is None:
            page = list_conversation_page(
                limit, scope.user_id, after=after, metadata=metadata, tenants=tenants
            )
        else:
            try:
                page = search_conversation_page(
                    q, limit, scope.user_id, after=after, metadata=metadata, tenants=tenants
                )
            except InvalidMemoryInputError as error:
                raise search_refused(error) from None
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
        context = {"media_url": self._media_url(request, summary.ref)}
        return Response(ConversationSerializer(conversation, context=context).data, headers=headers)

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
            try:
                page = search_message_page(found.id, q, after=after, limit=limit)
            except InvalidMemoryInputError as error:
                raise search_refused(error) from None
        headers = {}
        if page.next_after is not None:
            headers["Link"] = next_link(request, after=page.next_after)
        context = {"media_url": self._media_url(request, ref)}
        data = ConversationMessageSerializer(page.items, many=True, context=context).data
        return Response(data, headers=headers)

    @documented("media")
    @action(
        detail=True,
        methods=["get"],
        url_path=r"messages/(?P<position>[0-9]{1,10})/media/(?P<part>[0-9]{1,6})",
        renderer_classes=[MediaRenderer, *READABLE_RENDERERS],
    )
    def media(self, request: Request, ref: str, position: str, part: str) -> HttpResponse:
        """The binary content of a Pydantic AI message's part (``?item=``:
        its index in the part's content list)."""
        found = self._find(request, ref)
        item = request.query_params.get("item")
        response = media_response(found.id, int(position), int(part), item)
        if response is None:
            raise NotFound("No such media.")
        return response

    @documented("runs")
    @action(detail=True, methods=["get"])
    def runs(self, request: Request, ref: str) -> Response:
        limit = self._limit(request)
        run_id = identifier_param(request, "runId")
        before = _cursor(request, decode_run_cursor)
        found = self._find(request, ref)
        # As on the admin's conversation page: a failed run's error message
        # only for those who may view failed runs.
        may_see_failures = request.user.has_perm(f"{APP_LABEL}.view_failedrun")
        page = list_run_page(
            found.id, limit=limit, run_id=run_id, before=before, error_messages=may_see_failures
        )
        data = {"totals": run_totals(found.id), "runs": page.items}
        headers = {}
        if page.next_key is not None:
            headers["Link"] = next_link(request, cursor=encode_run_cursor(page.next_key))
        return Response(ConversationRunsSerializer(data).data, headers=headers)

    @documented("lineage")
    @action(detail=True, methods=["get"])
    def lineage(self, request: Request, ref: str) -> Response:
        limit = self._limit(request)
        before = _cursor(request, decode_fork_cursor)
        found = self._find(request, ref)
        user_id = visibility(request).user_id
        tenants = visible_tenants(request)
        page = lineage_page(found.id, user_id=user_id, limit=limit, before=before, tenants=tenants)
        headers = {}
        if page.next_key is not None:
            headers["Link"] = next_link(request, cursor=encode_fork_cursor(page.next_key))
        return Response(LineageSerializer(page.lineage).data, headers=headers)

    @documented("summaries")
    @action(detail=True, methods=["get"])
    def summaries(self, request: Request, ref: str) -> Response:
        limit = self._limit(request)
        before = _cursor(request, decode_summary_cursor)
        found = self._find(request, ref)
        page = list_summary_page(found.id, limit=limit, before=before)
        headers = {}
        if page.next_before is not None:
            headers["Link"] = next_link(request, cursor=encode_summary_cursor(page.next_before))
        return Response(SummarySerializer(page.items, many=True).data, headers=headers)

    def handle_exception(self, exc: Exception) -> Response:
        # The documented error of a record that does not open, in JSON like
        # every other error of the API, instead of Django's HTML 500: a
        # message by its position; any other record (a summary, a failed
        # run's error) by the error's class alone.
        if isinstance(exc, UnreadableRecordError):
            body = unreadable_record(exc.record, exc.position, exc.error_type)
        elif isinstance(exc, unopenable_errors()):
            body = unreadable_record("record", None, type(exc).__name__)
        else:
            return super().handle_exception(exc)
        response = Response(body, status=UNREADABLE_STATUS)
        response.exception = True
        return response

    def _media_url(self, request: Request, ref: str) -> Callable[[int, int, int | None], str]:
        base = self.reverse_action("media", kwargs={"ref": ref, "position": 0, "part": 0})
        base = base.removesuffix("0/media/0/")

        def url(position: int, part: int, item: int | None) -> str:
            return f"{base}{position}/media/{part}/" + ("" if item is None else f"?item={item}")

        return url

    def _find(self, request: Request, ref: str) -> FoundConversation:
        scope = visibility(request)
        tenants = visible_tenants(request)
        found = None if scope.nothing else find_conversation(ref, scope.user_id, tenants=tenants)
        if found is None:
            raise NotFound("No such conversation.")
        return found


UNREADABLE_STATUS = 500
"""A stored record the server cannot open is the server's fault, not the caller's."""


def unreadable_record(
    record: str, position: int | None, error_type: str, of: str = "conversation"
) -> dict[str, Any]:
    """The body of :data:`UNREADABLE_STATUS`: which record (a message by its
    position: the API shows no row ids) of which ``of`` (a conversation, a
    LangGraph checkpoint) and the class of the error opening it raised;
    never any of its content."""
    where = "" if position is None else f" at position {position}"
    return {
        "detail": f"The {record}{where} of this {of} cannot be opened ({error_type}).",
        "code": "unreadable_record",
        "record": record,
        "position": position,
        "errorType": error_type,
    }


def _cursor(request: Request, decode: Callable[[str], K]) -> K | None:
    token = request.query_params.get("cursor")
    return None if token is None else decode(token)
