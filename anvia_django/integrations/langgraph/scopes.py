"""A LangGraph thread's (or store namespace's) user and tenant, carried in its id.

LangGraph names a thread by one string and a store namespace by labels;
neither has a place for whose it is. An application that builds its thread
ids with :func:`scoped_thread_id` (and its namespaces with
:func:`scoped_namespace`) gets the scope of its conversations for them
too: ``anvia_memory`` clears, erases and exports a user's threads and
items, and the admin shows tenant-limited staff their tenants' threads.

The form, one string that starts with what it belongs to so that a user's
or a tenant's threads are a prefix of the indexed column::

    anvia:t=<tenant>:u=<user>:<thread>     (either part left out when not given)

Each part is escaped (``%`` ``:`` ``.`` as ``%25`` ``%3A`` ``%2E``), so
any id round-trips and a namespace's label holds no dot. The tenant is the
tenant id, the value at the scope's first metadata key (as
``STAFF_TENANTS`` and the admin name it). :func:`thread_scope` and
:func:`namespace_scope` read them back: this module is the one place that
knows the form. An id that is not of this form has no user or tenant.

Imports no LangGraph: the commands use it without the extra.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from anvia_django.conf import ID_MAX_LENGTH, app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.validation import validate_identifier

from .models import NAMESPACE_LENGTH

MARKER = "anvia:"
TENANT = "t="
USER = "u="
END = ":"
"""Ends the tenant and the user part."""
NAMESPACE_SEPARATOR = "."
"""Between a namespace's labels in its column (``store_matching.SEPARATOR``)."""

_ESCAPES = {"%": "%25", ":": "%3A", ".": "%2E"}
_UNESCAPES = {code: char for char, code in _ESCAPES.items()}
_ESCAPED_PART = "(?:[^%:.]|%25|%3A|%2E)+"
"""A part as :func:`escape` writes it, not empty: what :func:`unescape` reads back."""


@dataclass(frozen=True, slots=True)
class ThreadScope:
    """What a thread id (or a namespace's first label) carries: the
    application's own thread id (``""`` for a namespace), the user and the
    tenant; ``None`` where it names none."""

    thread: str
    user_id: str | None = None
    tenant: str | None = None


def scoped_thread_id(thread: str, *, user_id: str | None = None, tenant: str | None = None) -> str:
    """The thread id to give LangGraph (``{"configurable": {"thread_id": ...}}``)
    for the application's ``thread`` of ``user_id`` in ``tenant``.

    Raises ``InvalidMemoryInputError`` (a ``ValueError``) naming the part at
    fault: an empty, whitespace-only or non-string part, a NUL, or an id
    longer than the column's 255 characters once escaped."""
    _check(thread, "thread", optional=False)
    built = scope_prefix(user_id=user_id, tenant=tenant) + escape(thread)
    if len(built) > ID_MAX_LENGTH:
        raise InvalidMemoryInputError(
            f"is {len(built)} characters long with its user and tenant (escaped); "
            f"the maximum is {ID_MAX_LENGTH}",
            path="thread_id",
        )
    return built


def scoped_namespace(
    *labels: str, user_id: str | None = None, tenant: str | None = None
) -> tuple[str, ...]:
    """A store namespace of ``user_id`` in ``tenant``: its scope as the first
    label, then ``labels`` (``scoped_namespace("memories", user_id="u1")``
    is ``("anvia:u=u1:", "memories")``). Same refusals, and at most 500
    characters in all (the namespace column), and a label with a dot."""
    for index, label in enumerate(labels):
        _check(label, f"labels[{index}]", optional=False)
        if NAMESPACE_SEPARATOR in label:
            raise InvalidMemoryInputError(
                "must not contain a dot (LangGraph refuses it)", path=f"labels[{index}]"
            )
    if user_id is None and tenant is None:
        raise InvalidMemoryInputError("give a user_id, a tenant or both", path="namespace")
    namespace = (scope_prefix(user_id=user_id, tenant=tenant), *labels)
    length = len(NAMESPACE_SEPARATOR.join(namespace))
    if length > NAMESPACE_LENGTH:
        raise InvalidMemoryInputError(
            f"is {length} characters long with its user and tenant (escaped); "
            f"the maximum is {NAMESPACE_LENGTH}",
            path="namespace",
        )
    return namespace


def scope_prefix(*, user_id: str | None = None, tenant: str | None = None) -> str:
    """What the ids (and namespaces) of ``user_id`` in ``tenant`` start
    with: ``anvia:t=<tenant>:u=<user>:``, a part left out when ``None``."""
    _check(user_id, "user_id", optional=True)
    _check(tenant, "tenant", optional=True)
    text = MARKER
    if tenant is not None:
        text += TENANT + escape(tenant) + END
    if user_id is not None:
        text += USER + escape(user_id) + END
    return text


@dataclass(frozen=True, slots=True)
class UserThreads:
    """How a query finds the ids whose :func:`thread_scope` names a user,
    in no tenant or in one: for each, what narrows (prefixes of the indexed
    column, a substring) and a pattern that decides.

    The patterns are regular expressions of the form in full, each part
    escaped as :func:`escape` writes it, the thread not empty; for Django's
    ``__regex``, case-sensitive on every backend: Python's ``re`` (SQLite),
    PostgreSQL's ``~`` and MariaDB's ``REGEXP BINARY`` read them alike
    (``re.escape`` puts a backslash before punctuation alone, a literal
    character in all three)."""

    alone: str
    """What their ids without a tenant start with: ``anvia:u=<user>:``."""
    alone_pattern: str
    in_a_tenant: str
    """What every tenant's ids start with: ``anvia:t=``."""
    named: str
    """What a tenant's id of theirs holds: ``:u=<user>:``."""
    in_a_tenant_pattern: str


def user_threads(user_id: str) -> UserThreads:
    """How to find the threads of ``user_id`` (:class:`UserThreads`)."""
    user = USER + escape(user_id) + END
    rest = f"{re.escape(user)}{_ESCAPED_PART}$"
    return UserThreads(
        alone=MARKER + user,
        alone_pattern=f"^{MARKER}{rest}",
        in_a_tenant=MARKER + TENANT,
        named=END + user,
        in_a_tenant_pattern=f"^{MARKER}{TENANT}{_ESCAPED_PART}{END}{rest}",
    )


def tenant_pattern(tenant: str, *, namespace: bool = False) -> str:
    """A pattern of the ids whose scope names ``tenant`` in full, as
    :func:`thread_scope` reads a thread id (``namespace``: as
    :func:`namespace_scope` reads a namespace column's text): what decides
    behind the indexed prefix ``scope_prefix(tenant=tenant)``, which also
    starts ids not of the form (``anvia:t=acme:x:y`` names no tenant)."""
    scope = f"^{re.escape(scope_prefix(tenant=tenant))}(?:{USER}{_ESCAPED_PART}{END})?"
    if namespace:
        return rf"{scope}(?:\{NAMESPACE_SEPARATOR}|$)"
    return f"{scope}{_ESCAPED_PART}$"


def thread_scope(thread_id: str) -> ThreadScope:
    """The thread, user and tenant ``thread_id`` carries; an id not made by
    :func:`scoped_thread_id` is the thread alone."""
    found = _parsed(thread_id)
    if found is None or not found.thread:
        return ThreadScope(thread_id)
    return found


def namespace_scope(namespace: Sequence[str] | str) -> ThreadScope | None:
    """The user and tenant of a store namespace (its labels, or its column's
    text), ``None`` for one not made by :func:`scoped_namespace`."""
    first = (
        namespace.split(NAMESPACE_SEPARATOR, 1)[0]
        if isinstance(namespace, str)
        else (namespace[0] if namespace else "")
    )
    found = _parsed(first)
    if found is None or found.thread or (found.user_id is None and found.tenant is None):
        return None
    return found


def escape(text: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in text)


def unescape(text: str) -> str | None:
    """``text`` unescaped; ``None`` when it is not the form :func:`escape` makes."""
    parts = text.split("%")
    out = [parts[0]]
    for part in parts[1:]:
        char = _UNESCAPES.get("%" + part[:2])
        if char is None:
            return None
        out.append(char + part[2:])
    unescaped = "".join(out)
    return unescaped if escape(unescaped) == text else None


def _parsed(text: str) -> ThreadScope | None:
    if not text.startswith(MARKER):
        return None
    rest = text[len(MARKER) :]
    values: dict[str, str | None] = {TENANT: None, USER: None}
    for name in (TENANT, USER):
        if rest.startswith(name) and END in rest:
            part, rest = rest[len(name) :].split(END, 1)
            value = unescape(part)
            if not value:
                return None
            values[name] = value
    if END in rest:
        return None
    thread = unescape(rest)
    if thread is None:
        return None
    return ThreadScope(thread, user_id=values[USER], tenant=values[TENANT])


def _check(value: object, name: str, *, optional: bool) -> None:
    validate_identifier(value, name, app_settings.input_limits, optional=optional)
