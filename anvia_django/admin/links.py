"""URLs between this app's admin pages, built without a query."""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.db.models import Model
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.conf import app_settings
from anvia_django.models import Conversation

from .paging import PAGE_PARAM


def change_url(site: AdminSite, model: type[Model], pk: object) -> str:
    opts = model._meta
    return reverse(
        f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk], current_app=site.name
    )


def changelist_url(site: AdminSite, model: type[Model]) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist", current_app=site.name)


def message_anchor(position: int) -> str:
    """The id of a message's element on the transcript page."""
    return f"m-{position}"


def transcript_url(site: AdminSite, conversation_id: int, position: int | None = None) -> str:
    """The conversation's page; with ``position``, the transcript page that
    holds that message, scrolled to it. Positions are dense (SPEC invariant
    1), so the page number follows from the position alone."""
    url = change_url(site, Conversation, conversation_id)
    if position is None:
        return url
    page = position // app_settings.ADMIN_TRANSCRIPT_PAGE_SIZE + 1
    return f"{url}?{PAGE_PARAM}={page}#{message_anchor(position)}"


def link(url: str, text: object) -> SafeString:
    return format_html('<a href="{}">{}</a>', url, text)
