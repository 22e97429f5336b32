"""The full-text index follows an UPDATE of a message's text.

Nothing updated a message's text until ``rotate-keys --reencrypt``, which
seals rows again (and seals rows written before encryption was on):

- SQLite: migration 0007 kept the FTS5 table with two UPDATE triggers, one
  removing the old text, one adding the new. SQLite fires the triggers of
  one event newest first, so the new text was added, then the old removed:
  a contentless FTS5 table removes the words it is given, so the words both
  texts shared left the index (every word, for a row sealed again with the
  same blind index tokens). One trigger now does both, in order.
- MariaDB/MySQL: 0007 filled the text column on INSERT only, so a row
  sealed in place kept its plain text there. A BEFORE UPDATE trigger now
  fills it as the INSERT trigger does.

PostgreSQL's expression index follows updates by itself. The SQL is written
out here and imports no application code.
"""

from __future__ import annotations

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

# The text of a message held in the column {m}, as migration 0007 indexes it.
_TEXT = """CASE json_type({m}, '$.content')
      WHEN 'text' THEN json_extract({m}, '$.content')
      WHEN 'array' THEN (
        SELECT group_concat(json_extract(part.value, '$.text'), ' ')
        FROM json_each({m}, '$.content') AS part
        WHERE CASE WHEN part.type = 'object' THEN json_type(part.value, '$.text') = 'text' END
      )
    END"""
_HAS_TEXT = "json_type({m}, '$.content') IN ('text', 'array')"

_REMOVE_OLD = f"""INSERT INTO anvia_django_message_fts (anvia_django_message_fts, rowid, body)
      SELECT 'delete', OLD.id, {_TEXT.format(m="OLD.message")}
      WHERE {_HAS_TEXT.format(m="OLD.message")};"""
_ADD_NEW = f"""INSERT INTO anvia_django_message_fts (rowid, body)
      SELECT NEW.id, {_TEXT.format(m="NEW.message")}
      WHERE {_HAS_TEXT.format(m="NEW.message")};"""

SQLITE_FORWARD = [
    "DROP TRIGGER IF EXISTS anvia_msg_fts_update_old",
    "DROP TRIGGER IF EXISTS anvia_msg_fts_update_new",
    f"""
    CREATE TRIGGER anvia_msg_fts_update AFTER UPDATE OF id, message
    ON anvia_django_memorymessage
    BEGIN
      {_REMOVE_OLD}
      {_ADD_NEW}
    END
    """,
]
# 0007's two triggers, as it made them.
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS anvia_msg_fts_update",
    f"""
    CREATE TRIGGER anvia_msg_fts_update_old AFTER UPDATE OF id, message
    ON anvia_django_memorymessage
    WHEN {_HAS_TEXT.format(m="OLD.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (anvia_django_message_fts, rowid, body)
      VALUES ('delete', OLD.id, {_TEXT.format(m="OLD.message")});
    END
    """,
    f"""
    CREATE TRIGGER anvia_msg_fts_update_new AFTER UPDATE OF id, message
    ON anvia_django_memorymessage
    WHEN {_HAS_TEXT.format(m="NEW.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (rowid, body)
      VALUES (NEW.id, {_TEXT.format(m="NEW.message")});
    END
    """,
]


# MariaDB/MySQL: 0007's text of a message, for the row being written.
_MYSQL_TEXT = r"""
    CASE JSON_TYPE(JSON_EXTRACT(NEW.message, '$.content'))
      WHEN 'STRING' THEN JSON_UNQUOTE(JSON_EXTRACT(NEW.message, '$.content'))
      WHEN 'ARRAY' THEN REGEXP_REPLACE(
        JSON_EXTRACT(NEW.message, '$.content[*].text'), '\\\\(u[0-9A-Fa-f]{4}|.)', ' ')
    END
"""
MYSQL_FORWARD = [
    f"""
    CREATE TRIGGER anvia_msg_search_text_update BEFORE UPDATE ON anvia_django_memorymessage
    FOR EACH ROW BEGIN
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET NEW.anvia_search_text = NULL;
      SET NEW.anvia_search_text = {_MYSQL_TEXT};
    END
    """
]
MYSQL_BACKWARD = ["DROP TRIGGER IF EXISTS anvia_msg_search_text_update"]


def _has_fts_table(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anvia_django_message_fts'"
        )
        return cursor.fetchone() is not None


def _statements(schema_editor: BaseDatabaseSchemaEditor, *, forward: bool) -> list[str]:
    vendor = schema_editor.connection.vendor
    if vendor == "mysql":
        return MYSQL_FORWARD if forward else MYSQL_BACKWARD
    if vendor == "sqlite" and _has_fts_table(schema_editor):  # FTS5 there: 0007 made it
        return SQLITE_FORWARD if forward else SQLITE_BACKWARD
    return []


def forward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    for statement in _statements(schema_editor, forward=True):
        schema_editor.execute(statement, params=None)


def backward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    for statement in _statements(schema_editor, forward=False):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0010_data_key_generations")]

    # atomic=False: MySQL cannot roll DDL back (as in 0007).
    operations = [migrations.RunPython(forward, backward, atomic=False, elidable=False)]
