"""Run records, one row each: usage across conversations, searchable by run id."""

from __future__ import annotations

from django.contrib import admin

from .counting import EstimatedCountPaginator
from .records import ConversationColumnMixin


class AgentRunAdmin(ConversationColumnMixin):
    list_display = (
        "run_id",
        "conversation_link",
        "status",
        "model_name",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "message_count",
        "started_at",
    )
    list_filter = ("status", ("started_at", admin.DateFieldListFilter))
    search_fields = (
        "run_id__exact",
        "conversation__session_id__exact",
        "conversation__user_id__exact",
    )
    search_help_text = "Exact run id, session id or user id."
    # Served by the started_at index.
    ordering = ("-started_at",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    fields = (
        "conversation",
        "run_id",
        "status",
        "model_name",
        "started_at",
        "finished_at",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "message_count",
        "failed_run",
    )
    readonly_fields = fields
