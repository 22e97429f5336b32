"""The scope's metadata keys (tenants) as options of ``anvia_memory``.

Under ``ANVIA_DJANGO["SCOPE"] = {"user_id": True, "metadata_keys": ["tenant_id",
"org.id"]}``, ``export``, ``clear``, ``erase`` and ``prune`` take
``--tenant-id`` and ``--org-id``: each key's dotted path with every ``.``
and ``_`` written as ``-`` (``--scope-<that>`` when ``--<that>`` is one of
the command's own options). They narrow the action to the conversations
whose metadata holds those strings, as the inspector's tenant filters do.

A tenant is the set of values at all the keys. An action whose
conversations span more than one tenant is refused unless it names the
tenant, or says with ``--all-tenants`` that it means every one: an erasure
request for a user of one tenant must not reach the same user id's data in
another.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.management import CommandError, CommandParser

from anvia_django.conf import app_settings
from anvia_django.persistence import ConversationFilter, tenants_of

ALL_TENANTS = "--all-tenants"

RESERVED_OPTIONS = frozenset(
    {
        # anvia_memory's own options, in every subcommand...
        "--user",
        "--session",
        "--thread",
        "--threads",
        "--output",
        "--batch-size",
        "--dry-run",
        "--yes",
        "--no-input",
        "--noinput",
        "--older-than",
        "--limit",
        "--since",
        "--until",
        "--reencrypt",
        "--verbosity",
        "--help",
        ALL_TENANTS,
        # ...and Django's, which every management command takes.
        "--version",
        "--settings",
        "--pythonpath",
        "--traceback",
        "--no-color",
        "--force-color",
        "--skip-checks",
    }
)
"""Options a metadata key's option never takes: it gets ``--scope-...`` instead."""

SHOWN = 5
"""At most this many tenants are named in a refusal."""


def option_names(paths: Sequence[str]) -> dict[str, str]:
    """Each metadata key's option (``tenant_id`` -> ``--tenant-id``,
    ``org.id`` -> ``--org-id``), unique and clear of the command's own."""
    names: dict[str, str] = {}
    for index, path in enumerate(paths):
        base = "-".join(word for word in re.split(r"[._]+", path) if word) or f"key-{index}"
        for name in (f"--{base}", f"--scope-{base}", f"--scope-{index}-{base}"):
            if name not in RESERVED_OPTIONS and name not in names.values():
                names[path] = name
                break
    return names


@dataclass(frozen=True, slots=True)
class TenantChoice:
    """The tenant an action is narrowed to (``metadata``: dotted path ->
    string), or ``all_tenants`` to act across tenants knowingly."""

    metadata: Mapping[str, str] = field(default_factory=dict)
    all_tenants: bool = False


NO_TENANT = TenantChoice()
"""No tenant named, and not ``--all-tenants``: an action across tenants is refused."""


def add_tenant_options(parser: CommandParser, value_type: Callable[[str], str]) -> None:
    """An option per metadata key of the ``SCOPE`` setting, and
    ``--all-tenants``; nothing when the scope names no metadata key."""
    paths = app_settings.scope.metadata_keys
    if not paths:
        return
    group = parser.add_argument_group(
        "tenants", "Under ANVIA_DJANGO['SCOPE'] metadata keys: which tenant to act on."
    )
    for index, (path, name) in enumerate(option_names(paths).items()):
        group.add_argument(
            name,
            dest=f"tenant_{index}",
            type=value_type,
            metavar="VALUE",
            help=f"Only conversations whose metadata holds this string at {path!r}.".replace(
                "%", "%%"
            ),
        )
    group.add_argument(
        ALL_TENANTS,
        action="store_true",
        help="Act on the conversations of every tenant the selection covers.",
    )


def tenant_choice(options: Mapping[str, Any]) -> TenantChoice:
    """The tenant the parsed ``options`` name (see :func:`add_tenant_options`)."""
    paths = app_settings.scope.metadata_keys
    metadata = {
        path: options[f"tenant_{index}"]
        for index, path in enumerate(paths)
        if options.get(f"tenant_{index}") is not None
    }
    return TenantChoice(metadata, all_tenants=bool(options.get("all_tenants")))


def require_one_tenant(
    selection: ConversationFilter, choice: TenantChoice, *, subject: str, verb: str, done: str
) -> None:
    """Refuse (``CommandError``) when the conversations ``selection`` covers
    are in more than one tenant and ``choice`` is not ``all_tenants``.
    ``subject`` names those conversations, ``verb`` and ``done`` the action
    (``"export"``, ``"exported"``), for the message. One query; none
    without metadata keys."""
    paths = app_settings.scope.metadata_keys
    if not paths or choice.all_tenants:
        return
    found = tenants_of(selection, paths, limit=SHOWN + 1)
    refuse_several_tenants(found, paths, subject=subject, verb=verb, done=done)


def refuse_several_tenants(
    found: Sequence[Sequence[str | None]],
    paths: Sequence[str],
    *,
    subject: str,
    verb: str,
    done: str,
) -> None:
    """Refuse (``CommandError``) when ``found`` (the tenants an action
    covers, in order: each its values of ``paths``, the metadata keys the
    tenant options name) holds more than one, naming the first
    :data:`SHOWN` and the options that pick one."""
    if len(found) <= 1:
        return
    several = f"at least {SHOWN + 1}" if len(found) > SHOWN else str(len(found))
    shown = ", ".join(_tenant_label(paths, values) for values in found[:SHOWN])
    options = " and ".join(option_names(paths)[path] for path in paths)
    raise CommandError(
        f"{subject} are in {several} tenants ({shown}): name one with {options}, or pass "
        f"{ALL_TENANTS} to {verb} those of every tenant. Nothing was {done}."
    )


def describe(choice: TenantChoice) -> str:
    """`` of tenant_id 'acme'`` for a narrowed action, else ``""``."""
    if not choice.metadata:
        return ""
    return " of " + ", ".join(f"{path} {value!r}" for path, value in choice.metadata.items())


def _tenant_label(paths: Sequence[str], values: Sequence[str | None]) -> str:
    parts = [
        f"{path} {'(none)' if value is None else repr(value)}"
        for path, value in zip(paths, values, strict=True)
    ]
    return parts[0] if len(parts) == 1 else "{" + ", ".join(parts) + "}"
