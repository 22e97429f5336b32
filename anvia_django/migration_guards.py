"""Refusals to go back, checked before ``migrate`` undoes anything.

Two of this app's migrations refuse to be unapplied while data would be
lost: 0008 while a session id has several conversations (its old unique
constraint forbids them), 0010 while data keys exist (0009 drops their
table). Inside the migration the refusal comes only after every later
migration was undone, each in a transaction of its own (on MySQL and
MariaDB with DDL that cannot be rolled back): ``migrate anvia_django 0007``
was refused and left the database at 0008. So ``pre_migrate`` runs the same
checks, the migrations' own functions, against the plan before anything
runs; the migrations keep theirs (they are history, frozen).
"""

from __future__ import annotations

import importlib
from typing import Any

from django.apps import AppConfig
from django.core.management import CommandError
from django.db import connections

GUARDED_REVERSALS = {
    "0008_conversation_scope": "refuse_if_sessions_are_shared",
    "0010_data_key_generations": "refuse_while_keys_exist",
}
"""Migrations whose reversal can be refused, and the function that refuses it."""


def refuse_unsafe_reversals(
    sender: AppConfig, *, using: str, apps: Any, plan: Any = None, **kwargs: Any
) -> None:
    """``pre_migrate``: raise ``CommandError`` before anything is undone when
    the plan unapplies a guarded migration that would refuse."""
    for migration, backwards in plan or ():
        if not backwards or migration.app_label != sender.label:
            continue
        name = GUARDED_REVERSALS.get(migration.name)
        if name is None:
            continue
        refuse = getattr(importlib.import_module(type(migration).__module__), name)
        try:
            # The functions read the schema editor's connection only.
            refuse(apps, connections[using].schema_editor())
        except RuntimeError as refusal:
            raise CommandError(f"{refusal} Nothing was unapplied.") from None
