"""The ``STAFF_TENANTS`` hook: the tenants a request may see in the admin and the API.

``ANVIA_DJANGO["STAFF_TENANTS"] = "myproject.tenancy.tenants_for"`` names a
callable (or is one) that takes the request and returns the ids of the
tenants its user may see: an iterable of strings, or ``None`` for every
tenant. A conversation's tenant id is the string at the scope's first
metadata key (``SCOPE["metadata_keys"][0]``). It is asked once per request,
on every page of this app's admin and every request of the inspector API,
superusers' included (return ``None`` for those who see everything).
Unset, the default, restricts nobody.

It narrows, never widens: the permission classes, the admin's view
permissions and owner mode still apply. A conversation of another tenant
reads as one that does not exist (404).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from anvia_django.conf import SETTINGS_NAME, app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.persistence import TenantRestriction

TenantsHook = Callable[[Any], "Iterable[str] | None"]

_ASKED = "_anvia_django_visible_tenants"
"""The request attribute that keeps the hook's answer for the rest of the request."""
_NOT_ASKED = object()


def load_hook(value: object) -> TenantsHook:
    """The hook from a dotted path or a callable; raises ``ImportError`` or
    ``TypeError`` when the setting names neither."""
    hook = import_string(value) if isinstance(value, str) else value
    if not callable(hook):
        raise TypeError(f"STAFF_TENANTS must be callable, not {type(hook).__name__}")
    return cast(TenantsHook, hook)


def tenant_path() -> str | None:
    """The metadata key that holds a conversation's tenant id: the scope's
    first; ``None`` for a scope without metadata keys."""
    keys = app_settings.scope.metadata_keys
    return keys[0] if keys else None


def visible_tenants(request: Any) -> TenantRestriction | None:
    """The tenants ``request`` may see (``None``: all), from the hook,
    asked once per request."""
    asked = getattr(request, _ASKED, _NOT_ASKED)
    if asked is not _NOT_ASKED:
        return cast("TenantRestriction | None", asked)
    restriction = _ask(request)
    setattr(request, _ASKED, restriction)
    return restriction


def _ask(request: Any) -> TenantRestriction | None:
    configured = app_settings.STAFF_TENANTS
    if configured is None:
        return None
    hook = load_hook(configured)
    path = tenant_path()
    if path is None:
        # Fail closed: the check (anvia_django.E111) says why.
        raise ImproperlyConfigured(
            f"{SETTINGS_NAME}['STAFF_TENANTS'] needs a SCOPE with metadata keys: the first "
            "holds the tenant id."
        )
    answer = hook(request)
    if answer is None:
        return None
    if isinstance(answer, str | bytes) or not isinstance(answer, Iterable):
        raise TypeError(
            f"the STAFF_TENANTS hook {configured!r} must return tenant ids (an iterable of "
            f"strings) or None, not {type(answer).__name__}"
        )
    values = frozenset(answer)
    for value in values:
        if not isinstance(value, str):
            raise TypeError(
                f"the STAFF_TENANTS hook {configured!r} returned a {type(value).__name__} "
                "among the tenant ids; they must be strings"
            )
        try:
            validate_identifier(value, "tenant id", app_settings.input_limits, optional=False)
        except InvalidMemoryInputError as error:
            raise ValueError(f"the STAFF_TENANTS hook {configured!r} returned {error}") from None
    return TenantRestriction(path, values)
