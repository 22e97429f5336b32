"""Ids compare exactly and text is 4-byte UTF-8 on MySQL and MariaDB too.

Their default collations are case-insensitive (``"Abc"`` and ``"abc"``
would be one session, and could not even both exist under the unique
index) and ignore trailing spaces; a database created with ``utf8mb3``
cannot store emoji. The id and text columns now get the binary ``utf8mb4``
collation there. On every other database the columns do not change, so
this migration only records the new field classes (no table is rebuilt).
"""

from typing import Any

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import anvia_django.fields
import anvia_django.models

EXACT_COLUMNS = {
    "conversation": ["ref", "session_id", "user_id", "metadata"],
    "memorymessage": ["run_id", "role", "message"],
    "failedrun": ["run_id", "error_type", "error_message", "traceback", "messages"],
}


def exact_collation(connection: Any) -> str | None:
    """The binary, NO PAD ``utf8mb4`` collation of MySQL or MariaDB; ``None``
    elsewhere (frozen here: what the app chose when this was written)."""
    if connection.vendor != "mysql":
        return None
    if getattr(connection, "mysql_is_mariadb", False):
        return "utf8mb4_nopad_bin"
    version = getattr(connection, "mysql_version", (0,))
    return "utf8mb4_0900_bin" if version >= (8, 0, 17) else "utf8mb4_bin"


def _columns(field: Any, collation: str) -> tuple[Any, Any]:
    """The column as it was (the table's collation) and as it becomes (the
    exact collation)."""
    name, _, args, kwargs = field.deconstruct()
    field_class = models.CharField if isinstance(field, models.CharField) else models.TextField
    columns = []
    for db_collation in (None, collation):
        column = field_class(*args, **{**kwargs, "db_collation": db_collation})
        column.set_attributes_from_name(name)
        column.model = field.model
        columns.append(column)
    return columns[0], columns[1]


def _alter(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor, *, forwards: bool) -> None:
    collation = exact_collation(schema_editor.connection)
    if collation is None:
        return  # the columns are the same as before here
    for model_name, names in EXACT_COLUMNS.items():
        model = apps.get_model("anvia_django", model_name)
        for name in names:
            plain, exact = _columns(model._meta.get_field(name), collation)
            old, new = (plain, exact) if forwards else (exact, plain)
            schema_editor.alter_field(model, old, new)


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _alter(apps, schema_editor, forwards=True)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _alter(apps, schema_editor, forwards=False)


def _altered(model_name: str, name: str, field: Any) -> migrations.AlterField:
    return migrations.AlterField(model_name=model_name, name=name, field=field)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0002_unique_constraints_without_like_indexes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _altered(
                    "conversation",
                    "ref",
                    anvia_django.fields.IdentifierField(
                        default=anvia_django.models.new_ref, editable=False, max_length=32
                    ),
                ),
                _altered(
                    "conversation",
                    "session_id",
                    anvia_django.fields.IdentifierField(max_length=255),
                ),
                _altered(
                    "conversation",
                    "user_id",
                    anvia_django.fields.IdentifierField(blank=True, max_length=255, null=True),
                ),
                _altered(
                    "failedrun", "error_message", anvia_django.fields.ExactTextField(blank=True)
                ),
                _altered(
                    "failedrun", "error_type", anvia_django.fields.IdentifierField(max_length=255)
                ),
                _altered(
                    "failedrun", "run_id", anvia_django.fields.IdentifierField(max_length=255)
                ),
                _altered("failedrun", "traceback", anvia_django.fields.ExactTextField(blank=True)),
                _altered(
                    "memorymessage", "role", anvia_django.fields.IdentifierField(max_length=255)
                ),
                _altered(
                    "memorymessage", "run_id", anvia_django.fields.IdentifierField(max_length=255)
                ),
            ],
            # ``apps`` here is the state before this migration: both column
            # forms are rebuilt from each field's definition.
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        )
    ]
