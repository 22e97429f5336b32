"""The inspector's OpenAPI descriptions; imported only with drf-spectacular."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field

from .params import metadata_params
from .serializers import (
    ConversationMessageSerializer,
    ConversationRunsSerializer,
    ConversationSerializer,
    ConversationSummarySerializer,
    LineageSerializer,
    MessageField,
    MetadataField,
    SummarySerializer,
)
from .thread_serializers import (
    LangGraphCheckpointSerializer,
    LangGraphThreadHistorySerializer,
    LangGraphThreadSerializer,
)

extend_schema_field(
    {
        "type": "object",
        "description": "The stored message, exactly as appended.",
        "properties": {"role": {"type": "string", "minLength": 1}},
        "required": ["role"],
        "additionalProperties": True,
    }
)(MessageField)
extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "The metadata of the context that created or last updated the session.",
        "additionalProperties": True,
    }
)(MetadataField)

_LINK = OpenApiParameter(
    "Link",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description='RFC 8288 `<url>; rel="next"` when there is a next page; absent on the last.',
)
_CURSOR = OpenApiParameter(
    "cursor", OpenApiTypes.STR, description="Opaque; from a `Link: rel=next` header."
)
_LIMIT_HELP = "Page size: a positive integer, at most the configured maximum (else 400)."
_UNAUTHORIZED = OpenApiResponse(description="The permission classes refused the caller.")
_NOT_FOUND = OpenApiResponse(description="No such conversation (or not the caller's).")
_SEARCH = OpenApiParameter(
    "q",
    OpenApiTypes.STR,
    description=(
        "Only those whose message text holds every word of `q` (1-200 characters; "
        "operators are read as words). See docs/inspector.md, Content search."
    ),
)
_BAD_REQUEST = OpenApiResponse(description="A query parameter was invalid; the body names it.")
_UNREADABLE = OpenApiResponse(
    description=(
        "A message on the page does not open (encryption at rest: altered, or its key is "
        'gone): `{"detail", "code": "unreadable_record", "record", "position", "errorType"}`, '
        "never its content. See docs/inspector.md, Errors."
    )
)
_THROTTLED = OpenApiResponse(
    description="Past `INSPECTOR_THROTTLE_RATE`; `Retry-After` says when to come back."
)

OPERATIONS: dict[str, dict[str, Any]] = {
    "list": {
        "tags": ["anvia-django inspector"],
        "summary": "List conversations, most recently updated first",
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            OpenApiParameter("userId", OpenApiTypes.STR, description="Only this user's."),
            _SEARCH,
            OpenApiParameter(
                "cursor", OpenApiTypes.STR, description="Opaque; from a `Link: rel=next` header."
            ),
            _LINK,
        ],
        "responses": {
            200: ConversationSummarySerializer(many=True),
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
        },
    },
    "retrieve": {
        "tags": ["anvia-django inspector"],
        "summary": "A conversation with the first page of its messages",
        "description": (
            "`messages` holds the first page (position order). When `messageCount` exceeds "
            "it, a `Link: rel=next` header points at the messages endpoint for the rest."
        ),
        "parameters": [_LINK],
        "responses": {
            200: ConversationSerializer,
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
            500: _UNREADABLE,
        },
    },
    "messages": {
        "tags": ["anvia-django inspector"],
        "summary": "A page of a conversation's messages, in position order",
        "parameters": [
            OpenApiParameter(
                "after", OpenApiTypes.INT, description="Only messages with a higher position."
            ),
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            _SEARCH,
            _LINK,
        ],
        "responses": {
            200: ConversationMessageSerializer(many=True),
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
            500: _UNREADABLE,
        },
    },
    "media": {
        "tags": ["anvia-django inspector"],
        "summary": "The binary content of a Pydantic AI message's part (an image, a file)",
        "description": (
            "A message's `dataUrl` points here. PNG, JPEG, GIF and WebP images are sent as "
            "themselves; anything else as an `application/octet-stream` download."
        ),
        "parameters": [
            OpenApiParameter(
                "item",
                OpenApiTypes.INT,
                description="The index in the part's content list (a user prompt's items).",
            ),
        ],
        "responses": {
            (200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The bytes."),
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
        },
    },
    "runs": {
        "tags": ["anvia-django inspector"],
        "summary": "A conversation's runs, newest first, with token totals over all of them",
        "description": (
            "Each message's `runId` names its run here. Token counts are null where the "
            "model did not report them; `totals` sum what was reported."
        ),
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            OpenApiParameter("runId", OpenApiTypes.STR, description="Only this run."),
            _CURSOR,
            _LINK,
        ],
        "responses": {
            200: ConversationRunsSerializer,
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
        },
    },
    "lineage": {
        "tags": ["anvia-django inspector"],
        "summary": "Where a conversation was forked from, and its forks (newest first)",
        "description": (
            "`position` is how many of the source's messages the fork copied. A deleted "
            "source (or another user's, in owner mode) has a null `ref` and `sessionId`. "
            "`forks` is paged (`limit`, `Link: rel=next`); every page names the source."
        ),
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            _CURSOR,
            _LINK,
        ],
        "responses": {
            200: LineageSerializer,
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
        },
    },
    "summaries": {
        "tags": ["anvia-django inspector"],
        "summary": "A conversation's compaction summaries, newest first",
        "description": (
            "The agent's memory loads the newest summary followed by the messages after "
            "`coversThrough`; the full transcript stays under `messages`."
        ),
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            _CURSOR,
            _LINK,
        ],
        "responses": {
            200: SummarySerializer(many=True),
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: _NOT_FOUND,
        },
    },
    "langgraph-threads": {
        "tags": ["anvia-django inspector: LangGraph"],
        "summary": "List LangGraph threads, the one with the newest checkpoint first",
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            OpenApiParameter("threadId", OpenApiTypes.STR, description="Only this thread."),
            _CURSOR,
            _LINK,
        ],
        "responses": {
            200: LangGraphThreadSerializer(many=True),
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
        },
    },
    "langgraph-thread": {
        "tags": ["anvia-django inspector: LangGraph"],
        "summary": "A LangGraph thread's checkpoints (every namespace), newest first",
        "parameters": [
            OpenApiParameter("limit", OpenApiTypes.INT, description=_LIMIT_HELP),
            _CURSOR,
            _LINK,
        ],
        "responses": {
            200: LangGraphThreadHistorySerializer,
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: OpenApiResponse(description="No such thread."),
        },
    },
    "langgraph-checkpoint": {
        "tags": ["anvia-django inspector: LangGraph"],
        "summary": "A LangGraph checkpoint: its channel values and pending writes, decoded",
        "description": (
            "Values are loaded with LangGraph's serializer and given as JSON: a channel "
            "holding a list of messages under `transcripts`, each message in the stored "
            "form the conversation messages endpoint shows; any other channel under "
            "`channelValues`."
        ),
        "parameters": [
            OpenApiParameter(
                "checkpointNs",
                OpenApiTypes.STR,
                description='The namespace: a subgraph\'s; "" or absent for the graph.',
            ),
        ],
        "responses": {
            200: LangGraphCheckpointSerializer,
            400: _BAD_REQUEST,
            403: _UNAUTHORIZED,
            404: OpenApiResponse(description="No such checkpoint."),
            500: _UNREADABLE,
        },
    },
}

for _operation in OPERATIONS.values():
    _operation["responses"][429] = _THROTTLED  # every endpoint is throttled


class InspectorAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the list's filter per metadata key of
    the ``SCOPE`` setting (``?tenantId=``), read when the schema is made."""

    def get_override_parameters(self) -> list[Any]:
        parameters: list[Any] = list(super().get_override_parameters())
        if getattr(self.view, "action", None) in getattr(self.view, "metadata_filter_actions", ()):
            parameters.extend(_metadata_parameter(name, path) for name, path in _filters())
        return parameters


def _filters() -> list[tuple[str, str]]:
    return list(metadata_params().items())


def _metadata_parameter(name: str, path: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.STR,
        description=(
            f"Only those whose metadata holds this string at `{path}` (a key of "
            'ANVIA_DJANGO["SCOPE"]). See docs/inspector.md, Tenant filters.'
        ),
    )
