"""Messages, failed runs and summaries, one row each, across conversations."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.core.memory.validation import dumps
from anvia_django.integrations.pydantic_ai.display import with_media_sizes
from anvia_django.models import FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence import (
    OpenedFailedRun,
    UnreadableMessage,
    UnreadableSummary,
    message_preview_source,
    opened_failed_run,
    opened_record_message,
    opened_summary,
    with_message_preview,
    with_summary_text,
)

from .counting import EstimatedCountPaginator
from .links import link, transcript_url
from .mixins import ReadOnlyAdminMixin, pretty_json
from .previews import SOURCE_CHARS, preview, preview_cell, unreadable_mark
from .search import MessageTextSearchMixin
from .tenants import TenantRestrictedAdminMixin

ROLES = ("user", "assistant", "tool", "system")


class RoleFilter(admin.SimpleListFilter):
    """The contract's roles as fixed choices: Django's own field filter
    would scan the whole message table for distinct roles on every page."""

    title = "role"
    parameter_name = "role"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(role, role) for role in ROLES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(role=value) if value else queryset


class ConversationColumnMixin(TenantRestrictedAdminMixin, ReadOnlyAdminMixin):
    """A "conversation" column that links to the conversation's page."""

    list_select_related = ("conversation",)

    @admin.display(description="conversation", ordering="conversation__session_id")
    def conversation_link(self, obj: Any) -> SafeString:
        return link(transcript_url(self.admin_site, obj.conversation_id), obj.conversation)


class MemoryMessageAdmin(MessageTextSearchMixin, ConversationColumnMixin):
    list_display = (
        "__str__",
        "conversation_link",
        "position",
        "role",
        "text",
        "run_id",
        "turn",
        "created_at",
        "in_transcript",
    )
    list_filter = (RoleFilter,)
    search_fields = ("run_id__exact", "conversation__session_id__exact")
    search_help_text = "Exact run id or session id, or words of the message's text."
    # Served by the (conversation, position) constraint's index.
    ordering = ("conversation_id", "position")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = (
        "conversation",
        "in_transcript",
        "position",
        "role",
        "run_id",
        "turn",
        "created_at",
        "message_json",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[MemoryMessage]:
        # The page title is str(message), which names the conversation. The
        # message itself is deferred: the list shows a preview, and the
        # record page opens it on its own, so one that does not open is
        # marked instead of failing the page.
        messages = super().get_queryset(request).select_related("conversation")
        return with_message_preview(messages, preview_chars=SOURCE_CHARS)

    @admin.display(description="text")
    def text(self, obj: MemoryMessage) -> SafeString | str:
        return preview_cell(message_preview_source(obj, SOURCE_CHARS))

    @admin.display(description="in the transcript")
    def in_transcript(self, obj: MemoryMessage) -> SafeString:
        url = transcript_url(self.admin_site, obj.conversation_id, obj.position)
        return link(url, f"#{obj.position} in {obj.conversation}")

    @admin.display(description="message")
    def message_json(self, obj: MemoryMessage) -> SafeString:
        message = opened_record_message(obj)
        if isinstance(message, UnreadableMessage):
            return unreadable_mark(message.id, message.error_type)
        return pretty_json(with_media_sizes(message))


class FailedRunAdmin(ConversationColumnMixin):
    list_display = ("run_id", "conversation_link", "error_type", "created_at")
    search_fields = ("run_id__exact", "conversation__session_id__exact", "error_type")
    search_help_text = "Exact run id or session id, or part of the error type."
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = (
        "conversation",
        "run_id",
        "error_type",
        "error_message_text",
        "created_at",
        "traceback_text",
        "messages_json",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[FailedRun]:
        # The payload (sealed with encryption on) is not loaded with the
        # rows: the list shows none of it, and the record page opens it on
        # its own, so one that does not open is marked instead of failing.
        return super().get_queryset(request).defer("error_message", "traceback", "messages")

    def _payload(self, obj: FailedRun) -> OpenedFailedRun | str:
        # Opened once per page, for its three fields.
        cached: OpenedFailedRun | str | None = getattr(obj, "_anvia_payload", None)
        if cached is None:
            cached = opened_failed_run(obj)
            obj._anvia_payload = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="error message")
    def error_message_text(self, obj: FailedRun) -> SafeString | str:
        payload = self._payload(obj)
        if isinstance(payload, str):
            return unreadable_mark(obj.pk, payload, "failed run")
        return payload.error_message

    @admin.display(description="traceback")
    def traceback_text(self, obj: FailedRun) -> SafeString:
        payload = self._payload(obj)
        if isinstance(payload, str):
            return unreadable_mark(obj.pk, payload, "failed run")
        return format_html('<pre class="anvia-json">{}</pre>', payload.traceback)

    @admin.display(description="messages of the failed run")
    def messages_json(self, obj: FailedRun) -> SafeString:
        payload = self._payload(obj)
        if isinstance(payload, str):
            return unreadable_mark(obj.pk, payload, "failed run")
        return pretty_json(with_media_sizes(payload.messages))


class MemorySummaryAdmin(ConversationColumnMixin):
    """Every compaction summary; the conversation page shows the newest few."""

    list_display = ("covers", "conversation_link", "summary_preview", "created_at")
    search_fields = ("conversation__session_id__exact",)
    search_help_text = "Exact session id."
    # Newest first; a conversation's summaries are created in covers order.
    ordering = ("-id",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = ("conversation", "covers", "created_at", "message_json")
    readonly_fields = fields

    @admin.display(description="summary", ordering="covers_through")
    def covers(self, obj: MemorySummary) -> str:
        return f"covers #0 to #{obj.covers_through}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[MemorySummary]:
        # Opened row by row as shown, so one that does not open is marked.
        return with_summary_text(super().get_queryset(request))

    @admin.display(description="text")
    def summary_preview(self, obj: MemorySummary) -> SafeString | str:
        summary = opened_summary(obj)
        if isinstance(summary, UnreadableSummary):
            return unreadable_mark(summary.id, summary.error_type, "summary")
        return preview(dumps(summary))

    @admin.display(description="message")
    def message_json(self, obj: MemorySummary) -> SafeString:
        summary = opened_summary(obj)
        if isinstance(summary, UnreadableSummary):
            return unreadable_mark(summary.id, summary.error_type, "summary")
        return pretty_json(summary)
