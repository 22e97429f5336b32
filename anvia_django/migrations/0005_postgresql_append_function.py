"""PostgreSQL: the append as one database function (``anvia_django_append``).

Other databases get nothing. The function's SQL is frozen here, as it was
when this migration was written; a later change to it is a new migration
(0006 replaced it). Until this has run, appends there run in steps.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

CREATE_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_append(
    p_ref text, p_session text, p_user text, p_scope text, p_now timestamptz,
    p_metadata text, p_run text, p_turn integer, p_roles text[], p_messages text[]
) RETURNS TABLE (
    out_id bigint, out_ref text, out_user text, out_count integer, out_updated_at timestamptz
) LANGUAGE plpgsql VOLATILE AS $append$
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

DROP_FUNCTION = """
DROP FUNCTION IF EXISTS anvia_django_append(
    text, text, text, text, timestamptz, text, text, integer, text[], text[]
)
"""


def create_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_FUNCTION, params=None)


def drop_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_FUNCTION, params=None)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0004_runs_forks_summaries")]

    operations = [migrations.RunPython(create_function, drop_function, elidable=False)]
