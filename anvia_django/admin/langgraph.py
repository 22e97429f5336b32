"""LangGraph's checkpoints, read-only: newest first, searchable by thread
id, each page showing its checkpoint's channel values and pending writes
decoded (the ``messages`` channel as a transcript), with links to its
parent and to the thread's history.

Registered only when LangGraph is installed (the ``langgraph`` extra):
decoding needs its serializer. Staff whom the tenant restriction
(``tenants.py``) limits to some tenants see the threads whose ids carry
one of them (``scoped_thread_id``), and no other.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from anvia_django.integrations.langgraph.decoding import decoded, is_messages, json_safe
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint
from anvia_django.integrations.langgraph.reads import StoredCheckpoint
from anvia_django.integrations.langgraph.threads import visible
from anvia_django.tenants import visible_tenants

from .mixins import ReadOnlyAdminMixin, pretty_json
from .transcript import json_text


class LangGraphCheckpointAdmin(ReadOnlyAdminMixin):
    list_display = ("checkpoint_id", "thread_link", "checkpoint_ns", "source", "step", "created_at")
    search_fields = ("thread_id__exact",)  # "=thread_id" would ignore case (iexact)
    search_help_text = "Exact thread id."
    # Newest first: checkpoint ids grow with time (served by their index).
    ordering = ("-checkpoint_id",)
    show_full_result_count = False
    fields = (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_link",
        "run_id",
        "created_at",
        "metadata_shown",
        "channel_values",
        "pending_writes",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request).defer("checkpoint")
        return visible(rows, tenants=visible_tenants(request))

    @admin.display(description="thread", ordering="thread_id")
    def thread_link(self, obj: LangGraphCheckpoint) -> SafeString:
        return format_html('<a href="{}">{}</a>', _history_url(obj.thread_id), obj.thread_id)

    @admin.display(description="source")
    def source(self, obj: LangGraphCheckpoint) -> str:
        return str(obj.metadata.get("source", ""))

    @admin.display(description="step")
    def step(self, obj: LangGraphCheckpoint) -> str:
        return str(obj.metadata.get("step", ""))

    @admin.display(description="parent")
    def parent_link(self, obj: LangGraphCheckpoint) -> SafeString | str:
        parent = (
            LangGraphCheckpoint.objects.using(obj._state.db)
            .filter(
                thread_id=obj.thread_id,
                checkpoint_ns=obj.checkpoint_ns,
                checkpoint_id=obj.parent_checkpoint_id,
            )
            .values_list("pk", flat=True)
            .first()
        )
        if parent is None:
            return obj.parent_checkpoint_id or "-"
        url = reverse("admin:anvia_django_langgraphcheckpoint_change", args=[parent])
        return format_html('<a href="{}">{}</a>', url, obj.parent_checkpoint_id)

    @admin.display(description="metadata")
    def metadata_shown(self, obj: LangGraphCheckpoint) -> SafeString:
        return pretty_json(obj.metadata)

    @admin.display(description="channel values")
    def channel_values(self, obj: LangGraphCheckpoint) -> SafeString:
        values = _decoded(obj).checkpoint["channel_values"]
        return format_html_join(
            "", "<h4>{}</h4>{}", ((name, _shown(value)) for name, value in sorted(values.items()))
        )

    @admin.display(description="pending writes")
    def pending_writes(self, obj: LangGraphCheckpoint) -> SafeString | str:
        writes = _decoded(obj).pending_writes or []
        if not writes:
            return "-"
        return format_html_join(
            "",
            "<h4>{} → {}</h4>{}",
            ((task_id, channel, _shown(value)) for task_id, channel, value in writes),
        )


def _history_url(thread_id: str) -> str:
    changelist = reverse("admin:anvia_django_langgraphcheckpoint_changelist")
    return f"{changelist}?{urlencode({'q': thread_id})}"


def _decoded(obj: LangGraphCheckpoint) -> Any:
    cached = getattr(obj, "_decoded", None)
    if cached is None:
        row = StoredCheckpoint(
            obj.thread_id,
            obj.checkpoint_ns,
            obj.checkpoint_id,
            obj.parent_checkpoint_id,
            obj.type,
            obj.checkpoint,
            obj.metadata,
        )
        cached = decoded(row, using=obj._state.db)
        obj._decoded = cached  # type: ignore[attr-defined]
    return cached


def _shown(value: Any) -> SafeString:
    """Messages as a transcript (role, then text); anything else as JSON."""
    if is_messages(value):
        return format_html(
            '<div class="anvia-transcript">{}</div>',
            format_html_join(
                "",
                "<p><strong>{}</strong> {}</p>",
                ((message.type, _text(message.content)) for message in value),
            ),
        )
    return pretty_json(json_safe(value))


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json_text(content)
