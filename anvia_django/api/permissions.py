"""The permission and authentication classes configured in ``ANVIA_DJANGO``.

Resolved per request from settings, so ``override_settings`` works and the
project's ``REST_FRAMEWORK`` permission defaults never apply to the inspector.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.module_loading import import_string
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.settings import api_settings

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
