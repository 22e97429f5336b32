"""Owner mode: which conversations a request may see.

With ``ANVIA_DJANGO["INSPECTOR_OWNER_MODE"]`` on, every caller sees only the
conversations whose ``user_id`` is the one the resolver returns for the
request. It fails closed: a resolver that returns nothing (anonymous user,
no primary key, empty string) shows no conversation at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.utils.module_loading import import_string
from rest_framework.request import Request

from anvia_django.conf import app_settings

UserResolver = Callable[[Request], "str | None"]


@dataclass(frozen=True, slots=True)
class Visibility:
    """What a request may read: ``nothing``, or rows filtered on ``user_id``
    (``None``: every conversation)."""

    user_id: str | None
    nothing: bool = False


def request_user_pk(request: Request) -> str | None:
    """The default resolver: the authenticated user's primary key as a string."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or user.pk is None:
        return None
    return str(user.pk)


def load_resolver(value: object) -> UserResolver:
    """A resolver from a dotted path or a callable; raises ``ImportError``
    or ``TypeError`` when the setting names neither."""
    resolver = import_string(value) if isinstance(value, str) else value
    if not callable(resolver):
        raise TypeError(f"INSPECTOR_USER_RESOLVER must be callable, not {type(resolver).__name__}")
    return cast(UserResolver, resolver)


def visibility(request: Request, requested_user_id: str | None = None) -> Visibility:
    """Combine owner mode with the ``userId`` a client asked for."""
    if not app_settings.INSPECTOR_OWNER_MODE:
        return Visibility(user_id=requested_user_id)
    owner: Any = load_resolver(app_settings.INSPECTOR_USER_RESOLVER)(request)
    if not isinstance(owner, str) or not owner:
        return Visibility(user_id=None, nothing=True)
    if requested_user_id is not None and requested_user_id != owner:
        return Visibility(user_id=None, nothing=True)
    return Visibility(user_id=owner)
