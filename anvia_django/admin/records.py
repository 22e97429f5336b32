"""Messages and failed runs, one row each, for searching across conversations."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.models import FailedRun, MemoryMessage

from .counting import EstimatedCountPaginator
from .mixins import ReadOnlyAdminMixin, pretty_json
from .search import MessageTextSearchMixin, transcript_anchor


class MemoryMessageAdmin(MessageTextSearchMixin, ReadOnlyAdminMixin):
    list_display = (
        "conversation",
        "position",
        "role",
        "run_id",
        "turn",
        "created_at",
        "in_transcript",
    )
    list_select_related = ("conversation",)
    search_fields = ("=run_id", "=conversation__session_id")
    search_help_text = "Exact run id or session id, or words of the message's text."
    # Served by the (conversation, position) constraint's index.
    ordering = ("conversation_id", "position")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = ("conversation", "position", "role", "run_id", "turn", "created_at", "message_json")
    readonly_fields = fields

    @admin.display(description="transcript")
    def in_transcript(self, obj: MemoryMessage) -> SafeString:
        opts = obj._meta
        url = reverse(
            f"admin:{opts.app_label}_conversation_change",
            args=[obj.conversation_id],
            current_app=self.admin_site.name,
        )
        return format_html(
            '<a href="{}">#{}</a>', url + transcript_anchor(obj.position), obj.position
        )

    @admin.display(description="message")
    def message_json(self, obj: MemoryMessage) -> SafeString:
        return pretty_json(obj.message)


class FailedRunAdmin(ReadOnlyAdminMixin):
    list_display = ("conversation", "run_id", "error_type", "created_at")
    list_select_related = ("conversation",)
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
        return pretty_json(obj.messages)
