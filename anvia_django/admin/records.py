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

from .counting import EstimatedCountPaginator
from .links import link, transcript_url
from .mixins import ReadOnlyAdminMixin, pretty_json
from .previews import preview
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
        "run_id",
        "turn",
        "created_at",
        "in_transcript",
    )
    list_filter = (RoleFilter,)
    search_fields = ("=run_id", "=conversation__session_id")
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
        # The page title is str(message), which names the conversation.
        return super().get_queryset(request).select_related("conversation")

    @admin.display(description="in the transcript")
    def in_transcript(self, obj: MemoryMessage) -> SafeString:
        url = transcript_url(self.admin_site, obj.conversation_id, obj.position)
        return link(url, f"#{obj.position} in {obj.conversation}")

    @admin.display(description="message")
    def message_json(self, obj: MemoryMessage) -> SafeString:
        return pretty_json(with_media_sizes(obj.message))


class FailedRunAdmin(ConversationColumnMixin):
    list_display = ("run_id", "conversation_link", "error_type", "created_at")
    search_fields = ("=run_id", "=conversation__session_id", "error_type")
    search_help_text = "Exact run id or session id, or part of the error type."
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = (
        "conversation",
        "run_id",
        "error_type",
        "error_message",
        "created_at",
        "traceback_text",
        "messages_json",
    )
    readonly_fields = fields

    @admin.display(description="traceback")
    def traceback_text(self, obj: FailedRun) -> SafeString:
        return format_html('<pre class="anvia-json">{}</pre>', obj.traceback)

    @admin.display(description="messages of the failed run")
    def messages_json(self, obj: FailedRun) -> SafeString:
        return pretty_json(with_media_sizes(obj.messages))


class MemorySummaryAdmin(ConversationColumnMixin):
    """Every compaction summary; the conversation page shows the newest few."""

    list_display = ("covers", "conversation_link", "summary_preview", "created_at")
    search_fields = ("=conversation__session_id",)
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

    @admin.display(description="text")
    def summary_preview(self, obj: MemorySummary) -> str:
        return preview(dumps(obj.message))

    @admin.display(description="message")
    def message_json(self, obj: MemorySummary) -> SafeString:
        return pretty_json(obj.message)
