"""Content search: a full-text index over each message's text, kept by the database.

What is indexed is the message's text, not its JSON: ``content`` when it is
a string, else the ``text`` of every object in a ``content`` list. Keys
("role", "content"), tool calls and structured tool results are not text.

- PostgreSQL: a GIN expression index on ``to_tsvector('simple', ...)`` of an
  immutable PL/pgSQL function that extracts that text. Measured cheaper to append
  to than a stored generated ``tsvector`` column (no wider heap rows).
- SQLite: a contentless FTS5 table filled by triggers, when the library has
  FTS5 (a system check warns, and search scans, when it has not).
- MariaDB/MySQL: a column holding the text, kept by a trigger, with a
  FULLTEXT index (InnoDB).

The SQL is written out here, per vendor, and imports no application code:
this migration must mean the same thing when the app's code has moved on.
Existing rows are indexed by the statements themselves.
"""

from __future__ import annotations

from django.db import DatabaseError, migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

POSTGRESQL_FORWARD = [
    # A function, so the index expression and the search query spell the
    # text once; IMMUTABLE (jsonb parsing and extraction are) so it may be
    # in an index. PL/pgSQL, not SQL: an SQL function that cannot be inlined
    # is planned again by every INSERT statement (measured: 95 us a row
    # against 20 us), while PL/pgSQL keeps its plans for the session.
    # COST 1000 (default 100) tells the planner what rechecking a row costs:
    # at 100 it read a rare word's 51 newest hits backwards along the primary
    # key, running the function on every row (seconds at 10^6 messages),
    # instead of asking the GIN index (a millisecond).
    # Messages hold valid JSON without U+0000 (the store refuses it on
    # every backend), so the cast cannot fail on a stored row.
    """
    CREATE OR REPLACE FUNCTION anvia_django_message_text(message text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$
    DECLARE
      parsed jsonb := message::jsonb;
    BEGIN
      CASE jsonb_typeof(parsed -> 'content')
        WHEN 'string' THEN
          RETURN parsed ->> 'content';
        WHEN 'array' THEN
          RETURN (
            SELECT string_agg(part ->> 'text', ' ')
            FROM jsonb_array_elements(parsed -> 'content') AS part
            WHERE jsonb_typeof(part -> 'text') = 'string'
          );
        ELSE
          RETURN NULL;
      END CASE;
    END
    $$
    """,
    # 'simple': no stemming and no stop words, whatever the language, like
    # the other backends' tokenizers.
    """
    CREATE INDEX anvia_msg_text_search_idx ON anvia_django_memorymessage
    USING gin (to_tsvector('simple'::regconfig, coalesce(anvia_django_message_text(message), '')))
    """,
]
POSTGRESQL_BACKWARD = [
    "DROP INDEX IF EXISTS anvia_msg_text_search_idx",
    "DROP FUNCTION IF EXISTS anvia_django_message_text(text)",
]

# The text of a message held in the column {m}; a contentless FTS5 table
# forgets what it indexed, so deleting a row repeats this on the old value.
_SQLITE_TEXT = """CASE json_type({m}, '$.content')
      WHEN 'text' THEN json_extract({m}, '$.content')
      WHEN 'array' THEN (
        SELECT group_concat(json_extract(part.value, '$.text'), ' ')
        FROM json_each({m}, '$.content') AS part
        WHERE CASE WHEN part.type = 'object' THEN json_type(part.value, '$.text') = 'text' END
      )
    END"""
_SQLITE_HAS_TEXT = "json_type({m}, '$.content') IN ('text', 'array')"

SQLITE_FORWARD = [
    # remove_diacritics 2: "cafe" finds "café", as MariaDB's collation does.
    "CREATE VIRTUAL TABLE anvia_django_message_fts USING fts5("
    "body, content='', tokenize='unicode61 remove_diacritics 2')",
    f"""
    CREATE TRIGGER anvia_msg_fts_insert AFTER INSERT ON anvia_django_memorymessage
    WHEN {_SQLITE_HAS_TEXT.format(m="NEW.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (rowid, body)
      VALUES (NEW.id, {_SQLITE_TEXT.format(m="NEW.message")});
    END
    """,
    f"""
    CREATE TRIGGER anvia_msg_fts_delete AFTER DELETE ON anvia_django_memorymessage
    WHEN {_SQLITE_HAS_TEXT.format(m="OLD.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (anvia_django_message_fts, rowid, body)
      VALUES ('delete', OLD.id, {_SQLITE_TEXT.format(m="OLD.message")});
    END
    """,
    f"""
    CREATE TRIGGER anvia_msg_fts_update_old AFTER UPDATE OF id, message
    ON anvia_django_memorymessage
    WHEN {_SQLITE_HAS_TEXT.format(m="OLD.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (anvia_django_message_fts, rowid, body)
      VALUES ('delete', OLD.id, {_SQLITE_TEXT.format(m="OLD.message")});
    END
    """,
    f"""
    CREATE TRIGGER anvia_msg_fts_update_new AFTER UPDATE OF id, message
    ON anvia_django_memorymessage
    WHEN {_SQLITE_HAS_TEXT.format(m="NEW.message")}
    BEGIN
      INSERT INTO anvia_django_message_fts (rowid, body)
      VALUES (NEW.id, {_SQLITE_TEXT.format(m="NEW.message")});
    END
    """,
    f"""
    INSERT INTO anvia_django_message_fts (rowid, body)
    SELECT id, {_SQLITE_TEXT.format(m="message")} FROM anvia_django_memorymessage
    WHERE {_SQLITE_HAS_TEXT.format(m="message")}
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS anvia_msg_fts_insert",
    "DROP TRIGGER IF EXISTS anvia_msg_fts_delete",
    "DROP TRIGGER IF EXISTS anvia_msg_fts_update_old",
    "DROP TRIGGER IF EXISTS anvia_msg_fts_update_new",
    "DROP TABLE IF EXISTS anvia_django_message_fts",
]

# MariaDB/MySQL: the text, as a generated column could spell it, but kept by
# a trigger: a JSON function over a message nested deeper than the server's
# JSON depth limit (MariaDB: 32) fails, and in a generated column that would
# fail the INSERT of a message the store accepts (nesting up to 100). The
# trigger's handler leaves such a message's text NULL: not searchable, stored.
# A generated expression cannot loop over a list, so the text parts are taken
# as one JSON array text and its escapes (\n, \", \uXXXX) made spaces:
# every escaped character is one the FULLTEXT parser splits words on.
MYSQL_TEXT = r"""
    CASE JSON_TYPE(JSON_EXTRACT({row}message, '$.content'))
      WHEN 'STRING' THEN JSON_UNQUOTE(JSON_EXTRACT({row}message, '$.content'))
      WHEN 'ARRAY' THEN REGEXP_REPLACE(
        JSON_EXTRACT({row}message, '$.content[*].text'), '\\\\(u[0-9A-Fa-f]{{4}}|.)', ' ')
    END
"""
MYSQL_FORWARD = [
    # The case- and accent-insensitive collation is the column's own; the
    # message column keeps its binary one.
    """
    ALTER TABLE anvia_django_memorymessage
    ADD COLUMN anvia_search_text longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL
    """,
    f"""
    CREATE TRIGGER anvia_msg_search_text BEFORE INSERT ON anvia_django_memorymessage
    FOR EACH ROW BEGIN
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET NEW.anvia_search_text = NULL;
      SET NEW.anvia_search_text = {MYSQL_TEXT.format(row="NEW.")};
    END
    """,
]
MYSQL_FILL = f"""
    UPDATE anvia_django_memorymessage SET anvia_search_text = {MYSQL_TEXT.format(row="")}
    WHERE id BETWEEN %s AND %s
"""
"""Existing rows, a range of ids at a time (see :func:`_fill_mysql`)."""
MYSQL_INDEX = (
    "ALTER TABLE anvia_django_memorymessage"
    " ADD FULLTEXT INDEX anvia_msg_text_search_idx (anvia_search_text)"
)
MYSQL_BACKWARD = [
    "DROP TRIGGER IF EXISTS anvia_msg_search_text",
    "ALTER TABLE anvia_django_memorymessage DROP INDEX anvia_msg_text_search_idx,"
    " DROP COLUMN anvia_search_text",
]


def _fill_mysql(schema_editor: BaseDatabaseSchemaEditor, batch: int = 10_000) -> None:
    """Give existing rows their text; a row too deeply nested for the
    server's JSON functions keeps NULL, as the trigger gives new ones."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT MIN(id), MAX(id) FROM anvia_django_memorymessage")
        low, high = cursor.fetchone()
        if low is None:
            return
        for start in range(low, high + 1, batch):
            try:
                cursor.execute(MYSQL_FILL, [start, start + batch - 1])
            except DatabaseError:
                for row_id in range(start, min(start + batch, high + 1)):
                    try:
                        cursor.execute(MYSQL_FILL, [row_id, row_id])
                    except DatabaseError:
                        continue


FORWARD = {"postgresql": POSTGRESQL_FORWARD, "sqlite": SQLITE_FORWARD, "mysql": MYSQL_FORWARD}
BACKWARD = {"postgresql": POSTGRESQL_BACKWARD, "sqlite": SQLITE_BACKWARD, "mysql": MYSQL_BACKWARD}


def _sqlite_has_fts5(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pragma_compile_options WHERE compile_options = 'ENABLE_FTS5'")
        return cursor.fetchone() is not None


def _run(statements: dict[str, list[str]], schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite" and not _sqlite_has_fts5(schema_editor):
        return  # search scans instead; the system check says so
    for statement in statements.get(vendor, []):
        schema_editor.execute(statement, params=None)


def add_search_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _run(FORWARD, schema_editor)
    if schema_editor.connection.vendor == "mysql":
        _fill_mysql(schema_editor)
        schema_editor.execute(MYSQL_INDEX)


def drop_search_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _run(BACKWARD, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0006_append_function_index_plans")]

    operations = [
        # atomic=False: MySQL cannot roll DDL back, and Django refuses DDL
        # inside a transaction there; elsewhere the migration is one anyway.
        migrations.RunPython(add_search_index, drop_search_index, atomic=False, elidable=False)
    ]
