"""Conversation scopes: a conversation is found by its session id together
with a scope key (ANVIA_DJANGO["SCOPE"]; by default the user id).

- ``scope_key`` is added ("" for no user) and filled from the rows as the
  ``SCOPE`` setting is when this migration runs: the user id (the default),
  nothing (``{"user_id": False}``), or with ``metadata_keys`` the JSON list
  of the user id and those values of the stored metadata. A row whose
  metadata lacks a configured key keeps "" and stays reachable by its ref.
  A scope function cannot be run here: rows keep "".
- The unique constraint moves from ``session_id`` to
  ``(session_id, scope_key)``.
- PostgreSQL's ``anvia_django_append`` takes the scope key: the function
  below replaces 0006's, frozen here as it was.

Going back is refused while a session id has several conversations (the
old constraint could not hold).
"""

import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import anvia_django.fields

BATCH = 2000
HASHED_PREFIX = "sha256:"
KEY_MAX_LENGTH = 255

OLD_ARGUMENT_TYPES = "text, text, text, text, timestamptz, text, text, integer, text[], text[]"
NEW_ARGUMENT_TYPES = (
    "text, text, text, text, text, timestamptz, text, text, integer, text[], text[]"
)

CREATE_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_append(
    p_ref text, p_session text, p_key text, p_user text, p_owner text, p_now timestamptz,
    p_metadata text, p_run text, p_turn integer, p_roles text[], p_messages text[]
) RETURNS TABLE (
    out_id bigint, out_ref text, out_user text, out_count integer, out_updated_at timestamptz
) LANGUAGE plpgsql VOLATILE
-- Each statement below finds its rows through an index. PL/pgSQL keeps
-- their plans for the connection's life: planned while the tables were
-- empty (just migrated, or analysed when empty) they would scan whole
-- tables for as long as the connection lives.
SET enable_seqscan = off
AS $append$
DECLARE
    n integer := cardinality(p_messages);
    found_id bigint;
    found_ref text;
    found_user text;
    found_count integer;
    found_at timestamptz;
BEGIN
    LOOP
        SELECT t."id", t."ref", t."user_id", t."message_count", t."updated_at" INTO found_id, found_ref, found_user, found_count, found_at
            FROM "anvia_django_conversation" t
            WHERE t."session_id" = p_session AND t."scope_key" = p_key FOR UPDATE;
        IF FOUND THEN
            -- Under the row lock: the statements below see every append
            -- committed before this one.
            IF p_owner IS NOT NULL AND found_user IS DISTINCT FROM p_owner THEN
                RETURN;
            END IF;
            IF found_count >= n AND ARRAY(
                SELECT s."message" FROM "anvia_django_memorymessage" s
                WHERE s."conversation_id" = found_id AND s."run_id" = p_run
                    AND s."turn" = p_turn
                ORDER BY s."position" DESC LIMIT n
            ) = ARRAY(
                SELECT a.message FROM unnest(p_messages) WITH ORDINALITY AS a(message, ordinality)
                ORDER BY a.ordinality DESC
            ) THEN
                RETURN;
            END IF;
            -- Never backwards: a writer that read the clock, then queued on
            -- the lock behind a later one, must not move the conversation back.
            UPDATE "anvia_django_conversation" t SET "message_count" = t."message_count" + n,
                "updated_at" = GREATEST(t."updated_at", p_now),
                "metadata" = COALESCE(p_metadata, t."metadata")
                WHERE t."id" = found_id
                RETURNING t."message_count", t."updated_at" INTO found_count, found_at;
            EXIT;
        END IF;
        INSERT INTO "anvia_django_conversation" AS t ("ref", "session_id", "scope_key", "user_id",
                "created_at", "updated_at", "message_count", "metadata")
            VALUES (p_ref, p_session, p_key, p_user, p_now, p_now, n, p_metadata)
            ON CONFLICT ("session_id", "scope_key") DO NOTHING
            RETURNING t."id", t."ref", t."user_id", t."message_count", t."updated_at" INTO found_id, found_ref, found_user, found_count, found_at;
        -- Not found: another writer created the session first; lock its row.
        EXIT WHEN FOUND;
    END LOOP;
    INSERT INTO "anvia_django_memorymessage" ("conversation_id", "position", "run_id", "turn", "role", "message", "created_at")
        SELECT found_id, found_count - n + a.ordinality - 1, p_run, p_turn, a.role, a.message,
            found_at
        FROM unnest(p_roles, p_messages) WITH ORDINALITY AS a(role, message, ordinality);
    RETURN QUERY SELECT found_id, found_ref, found_user, found_count, found_at;
END
$append$
"""

CREATE_OLD_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_append(
    p_ref text, p_session text, p_user text, p_scope text, p_now timestamptz,
    p_metadata text, p_run text, p_turn integer, p_roles text[], p_messages text[]
) RETURNS TABLE (
    out_id bigint, out_ref text, out_user text, out_count integer, out_updated_at timestamptz
) LANGUAGE plpgsql VOLATILE
-- Each statement below finds its rows through an index. PL/pgSQL keeps
-- their plans for the connection's life: planned while the tables were
-- empty (just migrated, or analysed when empty) they would scan whole
-- tables for as long as the connection lives.
SET enable_seqscan = off
AS $append$
DECLARE
    n integer := cardinality(p_messages);
    found_id bigint;
    found_ref text;
    found_user text;
    found_count integer;
    found_at timestamptz;
BEGIN
    LOOP
        SELECT t."id", t."ref", t."user_id", t."message_count", t."updated_at" INTO found_id, found_ref, found_user, found_count, found_at
            FROM "anvia_django_conversation" t WHERE t."session_id" = p_session FOR UPDATE;
        IF FOUND THEN
            -- Under the row lock: the statements below see every append
            -- committed before this one.
            IF p_scope IS NOT NULL AND found_user IS DISTINCT FROM p_scope THEN
                RETURN;
            END IF;
            IF found_count >= n AND ARRAY(
                SELECT s."message" FROM "anvia_django_memorymessage" s
                WHERE s."conversation_id" = found_id AND s."run_id" = p_run
                    AND s."turn" = p_turn
                ORDER BY s."position" DESC LIMIT n
            ) = ARRAY(
                SELECT a.message FROM unnest(p_messages) WITH ORDINALITY AS a(message, ordinality)
                ORDER BY a.ordinality DESC
            ) THEN
                RETURN;
            END IF;
            -- Never backwards: a writer that read the clock, then queued on
            -- the lock behind a later one, must not move the conversation back.
            UPDATE "anvia_django_conversation" t SET "message_count" = t."message_count" + n,
                "updated_at" = GREATEST(t."updated_at", p_now),
                "metadata" = COALESCE(p_metadata, t."metadata")
                WHERE t."id" = found_id
                RETURNING t."message_count", t."updated_at" INTO found_count, found_at;
            EXIT;
        END IF;
        INSERT INTO "anvia_django_conversation" AS t ("ref", "session_id", "user_id",
                "created_at", "updated_at", "message_count", "metadata")
            VALUES (p_ref, p_session, p_user, p_now, p_now, n, p_metadata)
            ON CONFLICT ("session_id") DO NOTHING
            RETURNING t."id", t."ref", t."user_id", t."message_count", t."updated_at" INTO found_id, found_ref, found_user, found_count, found_at;
        -- Not found: another writer created the session first; lock its row.
        EXIT WHEN FOUND;
    END LOOP;
    INSERT INTO "anvia_django_memorymessage" ("conversation_id", "position", "run_id", "turn", "role", "message", "created_at")
        SELECT found_id, found_count - n + a.ordinality - 1, p_run, p_turn, a.role, a.message,
            found_at
        FROM unnest(p_roles, p_messages) WITH ORDINALITY AS a(role, message, ordinality);
    RETURN QUERY SELECT found_id, found_ref, found_user, found_count, found_at;
END
$append$
"""


def _configured_scope() -> Any:
    configured = getattr(settings, "ANVIA_DJANGO", None) or {}
    return configured.get("SCOPE", {"user_id": True, "metadata_keys": []})


def _key(user_id: str | None, metadata: Any, with_user: bool, paths: list[str]) -> str:
    values: list[Any] = [user_id] if with_user else []
    for path in paths:
        value = metadata
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return ""
            value = value[part]
        if not isinstance(value, str) or not value:
            return ""
        values.append(value)
    key = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    if len(key) <= KEY_MAX_LENGTH:
        return key
    return HASHED_PREFIX + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def fill_scope_keys(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    scope = _configured_scope()
    if not isinstance(scope, dict):
        return  # a scope function: see the module docstring
    conversations = apps.get_model("anvia_django", "Conversation").objects.using(
        schema_editor.connection.alias
    )
    with_user = scope.get("user_id", True) is not False
    paths = list(scope.get("metadata_keys") or [])
    if not paths:
        if with_user:
            conversations.filter(user_id__isnull=False).update(scope_key=models.F("user_id"))
        return
    after = 0
    while True:
        rows = list(
            conversations.filter(pk__gt=after)
            .order_by("pk")
            .values_list("pk", "user_id", "metadata")[:BATCH]
        )
        if not rows:
            return
        for pk, user_id, metadata in rows:
            decoded = json.loads(metadata) if isinstance(metadata, str) else metadata
            key = _key(user_id, decoded, with_user, paths)
            if key:
                conversations.filter(pk=pk).update(scope_key=key)
        after = rows[-1][0]


def refuse_if_sessions_are_shared(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    conversations = apps.get_model("anvia_django", "Conversation").objects.using(
        schema_editor.connection.alias
    )
    shared = (
        conversations.values("session_id")
        .annotate(n=models.Count("pk"))
        .filter(n__gt=1)
        .values_list("session_id", flat=True)
    )
    found = list(shared[:5])
    if found:
        raise RuntimeError(
            "Cannot unapply anvia_django 0008: these session ids have several conversations "
            f"(one per scope), which the old unique constraint forbids: {found!r}. "
            "Delete or rename the extra conversations first."
        )


def replace_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS anvia_django_append({OLD_ARGUMENT_TYPES})")
        schema_editor.execute(CREATE_FUNCTION, params=None)


def restore_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS anvia_django_append({NEW_ARGUMENT_TYPES})")
        schema_editor.execute(CREATE_OLD_FUNCTION, params=None)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0007_message_search")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="scope_key",
            field=anvia_django.fields.IdentifierField(
                blank=True, db_default="", default="", max_length=255
            ),
        ),
        migrations.RunPython(fill_scope_keys, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                fields=("session_id", "scope_key"), name="anvia_conv_scope_uniq"
            ),
        ),
        migrations.RemoveConstraint(model_name="conversation", name="anvia_conv_session_uniq"),
        migrations.RunPython(replace_function, restore_function, elidable=False),
        # Last, so that going back checks before the old constraint returns.
        migrations.RunPython(
            migrations.RunPython.noop, refuse_if_sessions_are_shared, elidable=False
        ),
    ]
