"""The permission and authentication classes configured in ``ANVIA_DJANGO``,
and :class:`AdminViewPermission`, the admin's rule for the API.

Resolved per request from settings, so ``override_settings`` works and the
project's ``REST_FRAMEWORK`` permission defaults never apply to the inspector.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.module_loading import import_string
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from anvia_django.conf import app_settings


def import_classes(entries: Iterable[Any]) -> list[type[Any]]:
    """Classes from dotted paths (or classes); raises ``ImportError`` when a
    path does not import and ``TypeError`` when an entry is not a class."""
    classes: list[type[Any]] = []
    for entry in entries:
        value = import_string(entry) if isinstance(entry, str) else entry
        if not isinstance(value, type):
            raise TypeError(f"{entry!r} is not a class")
        classes.append(value)
    return classes


def permission_classes() -> list[type[BasePermission]]:
    return import_classes(app_settings.INSPECTOR_PERMISSION_CLASSES)


def authentication_classes() -> list[type[BaseAuthentication]]:
    configured = app_settings.INSPECTOR_AUTHENTICATION_CLASSES
    if configured is None:
        return import_classes(api_settings.DEFAULT_AUTHENTICATION_CLASSES)
    return import_classes(configured)


class AdminViewPermission(BasePermission):
    """The admin's rule, for the API: an active staff member who holds the
    view permission of what the endpoint shows (superusers hold every one).

    An endpoint names its models in ``view_permission_models`` (by action
    for a viewset); the default is the conversation.
    """

    message = "Staff status and the view permission on what this endpoint shows are required."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active and user.is_staff):
            return False
        return bool(user.has_perms(required_view_permissions(view)))


def required_view_permissions(view: APIView) -> list[str]:
    """``app_label.view_<model>`` for each model the view's action shows."""
    by_action: dict[str | None, tuple[str, ...]] = getattr(view, "view_permission_models", {})
    action = getattr(view, "action", None)
    models = by_action.get(action, by_action.get(None, DEFAULT_VIEW_MODELS))
    return [f"{APP_LABEL}.view_{model}" for model in models]


APP_LABEL = "anvia_django"
DEFAULT_VIEW_MODELS = ("conversation",)
