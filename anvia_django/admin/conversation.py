"""The conversation list, and a conversation page that reads like a transcript."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.safestring import SafeString

from anvia_django.conf import app_settings
from anvia_django.models import Conversation
from anvia_django.persistence import (
    conversation_lineage,
    list_failed_runs,
    list_message_page,
    list_runs,
    list_summaries,
    run_totals,
)

from .counting import EstimatedCountPaginator
from .mixins import ReadOnlyAdminMixin, pretty_json
from .paging import TranscriptPage, transcript_page
from .search import ConversationTextSearchMixin
from .transcript import json_text, transcript_entries

FAILED_RUNS_SHOWN = 20
FORKS_SHOWN = 20
SUMMARIES_SHOWN = 5
RUNS_SHOWN = 20
FORKS_SHOWN = 20
SUMMARIES_SHOWN = 5


class ConversationAdmin(ConversationTextSearchMixin, ReadOnlyAdminMixin):
    list_display = ("session_id", "user_id", "message_count", "created_at", "updated_at")
    list_display_links = ("session_id",)
    search_fields = ("session_id", "user_id")
    search_help_text = "Search by session id, user id or words of the messages' text."
    list_filter = (
        ("updated_at", admin.DateFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
    )
    ordering = ("-updated_at", "-id")
    # The stored message_count, no COUNT per row; no COUNT(*) of the table.
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_per_page = 50
    fields = (
        "session_id",
        "user_id",
        "ref",
        "message_count",
        "created_at",
        "updated_at",
        "metadata_json",
    )
    readonly_fields = fields

    @admin.display(description="metadata")
    def metadata_json(self, obj: Conversation) -> SafeString:
        return pretty_json(obj.metadata)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Conversation | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(self.transcript_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def transcript_context(self, request: HttpRequest, obj: Conversation) -> dict[str, Any]:
        page: TranscriptPage = transcript_page(
            request, obj.message_count, app_settings.ADMIN_TRANSCRIPT_PAGE_SIZE
        )
        messages = list_message_page(obj.pk, after=page.after, limit=page.size)
        opts = obj._meta
        may_see_runs = request.user.has_perm(f"{opts.app_label}.view_agentrun")
        runs_url = reverse(
            f"admin:{opts.app_label}_agentrun_changelist", current_app=self.admin_site.name
        )
        changelist = reverse(
            f"admin:{opts.app_label}_conversation_changelist", current_app=self.admin_site.name
        )
        return {
            "lineage": conversation_lineage(obj.pk, limit=FORKS_SHOWN),
            "summaries": list_summaries(obj.pk, limit=SUMMARIES_SHOWN),
            "forks_shown": FORKS_SHOWN,
            "conversation_by_ref_url": f"{changelist}?ref__exact=",
            "all_forks_url": f"{changelist}?forked_from__id__exact={obj.pk}",
            "runs": list_runs(obj.pk, limit=RUNS_SHOWN) if may_see_runs else [],
            "run_totals": run_totals(obj.pk) if may_see_runs else None,
            "runs_shown": RUNS_SHOWN,
            "runs_url": f"{runs_url}?conversation__id__exact={obj.pk}" if may_see_runs else "",
            "transcript": transcript_entries(messages.items),
            "transcript_page": page,
            # Tracebacks and partial messages need their own view permission.
            "failed_runs": [
                (record, json_text(record.messages))
                for record in list_failed_runs(obj.pk, limit=FAILED_RUNS_SHOWN)
            ]
            if request.user.has_perm(f"{opts.app_label}.view_failedrun")
            else [],
            "failed_runs_shown": FAILED_RUNS_SHOWN,
            "failed_runs_url": (
                reverse(
                    f"admin:{opts.app_label}_failedrun_changelist", current_app=self.admin_site.name
                )
                + f"?conversation__id__exact={obj.pk}"
            ),
        }
