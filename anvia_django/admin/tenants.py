"""The admin under the ``STAFF_TENANTS`` hook: a staff member sees the rows
of their tenants alone, in lists, searches, filters and pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from anvia_django.persistence import restrict_to_tenants
from anvia_django.tenants import visible_tenants

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic only in django-stubs
    _ModelAdmin = admin.ModelAdmin


class TenantRestrictedAdminMixin(_ModelAdmin):
    """Every queryset of this admin (changelist, search, filters, the object
    of a page) within the tenants the request may see."""

    tenant_through = "conversation__"
    """The path from this admin's model to the conversation's fields."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        return restrict_to_tenants(rows, visible_tenants(request), through=self.tenant_through)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        found = super().get_object(request, object_id, from_field)
        if found is None and visible_tenants(request) is not None:
            # Not the admin's redirect ("perhaps it was deleted?"): another
            # tenant's row answers as a missing one does, with a 404.
            raise Http404("No such object.")
        return found
