"""The conversation list, and a conversation page that reads like a transcript."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.conf import app_settings
from anvia_django.integrations.pydantic_ai.display import with_media_sizes
from anvia_django.integrations.pydantic_ai.media import media_response
from anvia_django.models import AgentRun, Conversation, FailedRun, MemorySummary
from anvia_django.persistence import (
    TenantRestriction,
    conversation_lineage,
    conversation_row_ids,
    list_failed_runs,
    list_message_page,
    list_runs,
    list_summaries,
    opened_preview_source,
    run_row_ids,
    run_totals,
    with_preview_columns,
)
from anvia_django.tenants import visible_tenants

from .counting import EstimatedCountPaginator
from .links import change_url, changelist_url, transcript_url
from .mixins import ReadOnlyAdminMixin, pretty_json
from .paging import TranscriptPage, transcript_page
from .previews import SOURCE_CHARS, preview
from .scope_filters import scope_list_filters
from .search import ConversationTextSearchMixin
from .tenants import TenantRestrictedAdminMixin
from .transcript import MediaUrl, json_text, transcript_entries

FAILED_RUNS_SHOWN = 20
FORKS_SHOWN = 20
SUMMARIES_SHOWN = 5
RUNS_SHOWN = 20


class FailedRunFilter(admin.SimpleListFilter):
    title = "failed runs"
    parameter_name = "failed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "with failed runs"), ("no", "without")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("yes", "no"):
            return queryset.filter(has_failed_run=self.value() == "yes")
        return queryset


class ConversationAdmin(
    ConversationTextSearchMixin, TenantRestrictedAdminMixin, ReadOnlyAdminMixin
):
    tenant_through = ""
    list_display = (
        "session_id",
        "preview",
        "failed_marker",
        "user_id",
        "scope_key",
        "message_count",
        "created_at",
        "updated_at",
    )
    list_display_links = ("session_id",)
    search_fields = ("session_id", "user_id")
    search_help_text = "Search by session id, user id or words of the messages' text."
    list_filter = (
        FailedRunFilter,
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
        "scope_key",
        "ref",
        "message_count",
        "created_at",
        "updated_at",
        "metadata_json",
    )
    readonly_fields = fields

    def get_list_filter(self, request: HttpRequest) -> Any:
        # A filter per metadata key of ANVIA_DJANGO["SCOPE"], after the marker's.
        failed, *dates = super().get_list_filter(request)
        return (failed, *scope_list_filters(), *dates)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        # The preview and the marker come with the page's own query.
        return with_preview_columns(super().get_queryset(request), preview_chars=SOURCE_CHARS)

    @admin.display(description="first user message")
    def preview(self, obj: Conversation) -> str:
        return preview(opened_preview_source(obj, SOURCE_CHARS))

    @admin.display(description="failed", ordering="has_failed_run")
    def failed_marker(self, obj: Conversation) -> SafeString | str:
        if not getattr(obj, "has_failed_run", False):
            return ""
        return format_html(
            '<span class="anvia-failed" title="{}" style="color: var(--error-fg)">⚠ failed</span>',
            "This conversation has failed runs",
        )

    @admin.display(description="metadata")
    def metadata_json(self, obj: Conversation) -> SafeString:
        return pretty_json(obj.metadata)

    def get_urls(self) -> list[URLPattern]:
        media = path(
            "<path:object_id>/media/<int:position>/<int:part>/",
            self.admin_site.admin_view(self.media_view),
            name=self._media_url_name,
        )
        return [media, *super().get_urls()]

    @property
    def _media_url_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_media"

    def media_view(
        self, request: HttpRequest, object_id: str, position: int, part: int
    ) -> HttpResponse:
        """The binary content of a Pydantic AI message's part (``?item=`` in its content list)."""
        obj = self.get_object(request, object_id)
        response = None
        if obj is not None and self.has_view_permission(request, obj):
            response = media_response(obj.pk, position, part, request.GET.get("item"))
        if response is None:
            raise Http404("No such media.")
        return response

    def _media_url(self, obj: Conversation) -> MediaUrl:
        base = reverse(
            f"admin:{self._media_url_name}", args=[obj.pk, 0, 0], current_app=self.admin_site.name
        ).removesuffix("0/0/")

        def url(position: int, media: Any) -> str:
            item = "" if media.item is None else f"?item={media.item}"
            return f"{base}{position}/{media.part}/{item}"

        return url

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
        may = request.user.has_perm
        label = obj._meta.app_label
        may_see_runs = may(f"{label}.view_agentrun")
        site = self.admin_site
        runs = list_runs(obj.pk, limit=RUNS_SHOWN) if may_see_runs else []
        entries = transcript_entries(messages.items, self._media_url(obj))
        run_urls: dict[str, str] = {}
        if may_see_runs:
            run_ids = {entry.run_id for entry in entries} | {run.run_id for run in runs}
            run_urls = {
                run_id: change_url(site, AgentRun, pk)
                for run_id, pk in run_row_ids(obj.pk, run_ids).items()
            }
        runs_url = f"{changelist_url(site, AgentRun)}?conversation__id__exact={obj.pk}"
        summaries_url = f"{changelist_url(site, MemorySummary)}?conversation__id__exact={obj.pk}"
        failed_url = f"{changelist_url(site, FailedRun)}?conversation__id__exact={obj.pk}"
        return {
            **self._lineage_context(obj, visible_tenants(request)),
            "summaries": list_summaries(obj.pk, limit=SUMMARIES_SHOWN),
            "summaries_shown": SUMMARIES_SHOWN,
            "summaries_url": summaries_url if may(f"{label}.view_memorysummary") else "",
            "runs": [(run, run_urls.get(run.run_id)) for run in runs],
            "run_totals": run_totals(obj.pk) if may_see_runs else None,
            "runs_shown": RUNS_SHOWN,
            "runs_url": runs_url if may_see_runs else "",
            "transcript": [replace(e, run_url=run_urls.get(e.run_id)) for e in entries],
            "transcript_page": page,
            # Tracebacks and partial messages need their own view permission.
            "failed_runs": [
                (record, json_text(with_media_sizes(record.messages)))
                for record in list_failed_runs(obj.pk, limit=FAILED_RUNS_SHOWN)
            ]
            if may(f"{label}.view_failedrun")
            else [],
            "failed_runs_shown": FAILED_RUNS_SHOWN,
            "failed_runs_url": failed_url,
        }

    def _lineage_context(
        self, obj: Conversation, tenants: TenantRestriction | None
    ) -> dict[str, Any]:
        site = self.admin_site
        lineage = conversation_lineage(obj.pk, limit=FORKS_SHOWN, tenants=tenants)
        source = lineage.forked_from
        fork_ids = conversation_row_ids([fork.ref for fork in lineage.forks if fork.ref])
        changelist = changelist_url(site, Conversation)
        return {
            "lineage": lineage,
            "forked_from_url": (
                transcript_url(site, obj.forked_from_id)
                if source is not None and source.ref is not None and obj.forked_from_id
                else ""
            ),
            "forks": [
                (fork, transcript_url(site, fork_ids[fork.ref]) if fork.ref in fork_ids else "")
                for fork in lineage.forks
                if fork.ref is not None
            ],
            "forks_shown": FORKS_SHOWN,
            "all_forks_url": f"{changelist}?forked_from__id__exact={obj.pk}",
        }
