"""Query parameters of the inspector API, validated into DRF 400 answers.

Each error is keyed by, and names, the parameter that was wrong.
"""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.settings import api_settings

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.persistence import validate_after, validate_limit, validate_query

# Bounded, so a thousand-digit "number" is refused before int() parses it.
_INTEGER = re.compile(r"-?[0-9]{1,30}")


def limit_param(request: Request, *, default: int, maximum: int) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    value = _integer(raw, "limit", "must be a positive integer")
    try:
        return validate_limit(value, maximum=maximum)
    except InvalidMemoryInputError as error:
        raise _invalid("limit", str(error)) from None


def after_param(request: Request) -> int | None:
    raw = request.query_params.get("after")
    if raw is None:
        return None
    value = _integer(raw, "after", "must be a non-negative integer position")
    try:
        return validate_after(value)
    except InvalidMemoryInputError as error:
        raise _invalid("after", str(error)) from None


def user_id_param(request: Request) -> str | None:
    return identifier_param(request, "userId")


def identifier_param(request: Request, name: str) -> str | None:
    """An id-like parameter (``userId``, ``runId``): refused when empty,
    over-long or holding text no backend can compare."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        validate_identifier(raw, name, app_settings.input_limits, optional=False)
    except InvalidMemoryInputError as error:
        raise _invalid(name, str(error)) from None
    return raw


RESERVED_PARAMS = frozenset({"limit", "cursor", "after", "q", "userId", "runId", "format"})
"""The API's own parameters: a metadata key named like one gets no filter."""


def metadata_param_name(path: str) -> str:
    """The query parameter of a scope metadata key: its dotted path in
    camelCase (``tenant_id`` -> ``tenantId``, ``org.id`` -> ``orgId``)."""
    first, *rest = (word for word in re.split(r"[._]", path) if word)
    return first + "".join(word[:1].upper() + word[1:] for word in rest)


def metadata_params() -> dict[str, str]:
    """Query parameter name -> dotted path, for each metadata key of the
    ``SCOPE`` setting (none for a scope function)."""
    names = {metadata_param_name(path): path for path in app_settings.scope.metadata_keys}
    return {name: path for name, path in names.items() if name not in RESERVED_PARAMS}


def metadata_filter_param(request: Request) -> dict[str, str]:
    """The scope metadata values a request filters by (``?tenantId=acme``:
    ``{"tenant_id": "acme"}``); each checked as an id is."""
    values = {}
    for name, path in metadata_params().items():
        value = identifier_param(request, name)
        if value is not None:
            values[path] = value
    return values


KNOWN_QUERY_PARAMS: dict[str, frozenset[str]] = {
    "list": frozenset({"limit", "cursor", "q", "userId"}),
    "retrieve": frozenset(),
    "messages": frozenset({"after", "limit", "q"}),
    "media": frozenset({"item"}),
    "runs": frozenset({"limit", "runId", "cursor"}),
    "lineage": frozenset({"limit", "cursor"}),
    "summaries": frozenset({"limit", "cursor"}),
}
"""The query parameters each action of the conversation viewset reads,
besides DRF's ``?format=``; the list also takes each metadata key's."""

UNKNOWN_SHOWN = 5
NAME_SHOWN = 40


def refuse_unknown_params(
    request: Request, known: frozenset[str], *, with_metadata: bool = False
) -> None:
    """A 400 naming each query parameter (the first few) that is not in
    ``known``, the format override or, ``with_metadata``, a metadata key's."""
    allowed = set(known)
    if with_metadata:
        allowed.update(metadata_params())
    if api_settings.URL_FORMAT_OVERRIDE:
        allowed.add(api_settings.URL_FORMAT_OVERRIDE)
    unknown = sorted(set(request.query_params) - allowed)
    if not unknown:
        return
    takes = ", ".join(sorted(allowed)) or "none"
    errors = {}
    for name in unknown[:UNKNOWN_SHOWN]:
        # Named as sent, cut short: the key and the message are for a person.
        shown = name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN] + "..."
        errors[shown] = [f"{shown}: not a parameter of this endpoint (it takes {takes})"]
    raise ValidationError(errors)


def search_param(request: Request) -> str | None:
    """``q``, the words a message's text must hold; refused when empty,
    over-long or holding text no backend can compare."""
    raw = request.query_params.get("q")
    if raw is None:
        return None
    try:
        validate_query(raw)
    except InvalidMemoryInputError as error:
        raise _invalid("q", str(error)) from None
    return raw


def _integer(raw: str, name: str, requirement: str) -> int:
    if _INTEGER.fullmatch(raw) is None:
        raise _invalid(name, f"{name}: {requirement}")
    return int(raw)


def search_refused(error: InvalidMemoryInputError) -> ValidationError:
    """A search the store refuses for what it covers (more owners' keys
    than the blind index serves): a 400 naming ``q``, as a bad query is."""
    return _invalid("q", str(error))


def _invalid(name: str, message: str) -> ValidationError:
    return ValidationError({name: [message]})
