"""PostgreSQL: a LangGraph checkpoint is stored by one call of
``anvia_django_langgraph_put`` (``integrations/langgraph/writes.py``), one
round trip where the steps took seven. Its SQL is frozen here.

It does what the steps do, in their order: for a put that follows its
thread's latest, lock the parent's row, then read the latest in a statement
of its own (its snapshot, taken after the lock was granted, sees every put
committed before) and return it, writing nothing, when the parent is no
longer the latest; lock the base rows of the values stored as deltas and
return the channels whose base is not the row the caller remembers,
writing nothing; else insert the values (a version stored already is
kept) and the checkpoint (stored already: replaced). Other databases keep
the steps.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

ARGUMENT_TYPES = (
    "text, text, text, text, text, text, bytea, text, timestamptz, boolean, "
    "text[], text[], text[], bytea[], text[], text[], smallint[], text[], text[]"
)

CREATE_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_langgraph_put(
    p_thread text, p_ns text, p_id text, p_parent text, p_run text, p_type text,
    p_checkpoint bytea, p_metadata text, p_now timestamptz, p_check boolean,
    p_channels text[], p_versions text[], p_types text[], p_blobs bytea[],
    p_bases text[], p_anchors text[], p_depths smallint[], p_digests text[],
    p_base_digests text[]
) RETURNS TABLE (out_conflict boolean, out_latest text, out_stale text[])
LANGUAGE plpgsql VOLATILE
-- As anvia_django_append (0006): the cached plans find rows by index even
-- when they were made while the tables were empty.
SET enable_seqscan = off
AS $put$
DECLARE
    latest text;
    stale text[];
BEGIN
    IF p_check THEN
        IF p_parent IS NOT NULL THEN
            PERFORM 1 FROM "anvia_django_langgraphcheckpoint" t
                WHERE t."thread_id" = p_thread AND t."checkpoint_ns" = p_ns
                    AND t."checkpoint_id" = p_parent
                FOR UPDATE;
        END IF;
        SELECT t."checkpoint_id" INTO latest FROM "anvia_django_langgraphcheckpoint" t
            WHERE t."thread_id" = p_thread AND t."checkpoint_ns" = p_ns
            ORDER BY t."checkpoint_id" DESC LIMIT 1
            FOR UPDATE;
        IF latest IS DISTINCT FROM p_parent THEN
            RETURN QUERY SELECT true, latest, NULL::text[];
            RETURN;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_bases) AS b(base) WHERE b.base IS NOT NULL) THEN
        -- Locked until the commit: no deletion takes a base meanwhile.
        PERFORM 1 FROM "anvia_django_langgraphblob" s
            JOIN unnest(p_channels, p_bases) AS b(channel, base)
                ON s."channel" = b.channel AND s."version" = b.base
            WHERE s."thread_id" = p_thread AND s."checkpoint_ns" = p_ns
            FOR UPDATE OF s;
        SELECT array_agg(b.channel) INTO stale
            FROM unnest(p_channels, p_bases, p_base_digests) AS b(channel, base, digest)
            WHERE b.base IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM "anvia_django_langgraphblob" s
                WHERE s."thread_id" = p_thread AND s."checkpoint_ns" = p_ns
                    AND s."channel" = b.channel AND s."version" = b.base
                    AND s."digest" = b.digest
            );
        IF stale IS NOT NULL THEN
            RETURN QUERY SELECT false, NULL::text, stale;
            RETURN;
        END IF;
    END IF;
    INSERT INTO "anvia_django_langgraphblob" ("thread_id", "checkpoint_ns", "channel",
            "version", "type", "blob", "base_version", "anchor_version", "depth", "digest")
        SELECT p_thread, p_ns, v.channel, v.version, v.kind, v.blob, v.base, v.anchor,
            v.depth, v.digest
        FROM unnest(p_channels, p_versions, p_types, p_blobs, p_bases, p_anchors, p_depths,
            p_digests) AS v(channel, version, kind, blob, base, anchor, depth, digest)
        ON CONFLICT ("thread_id", "checkpoint_ns", "channel", "version") DO NOTHING;
    INSERT INTO "anvia_django_langgraphcheckpoint" AS t ("thread_id", "checkpoint_ns",
            "checkpoint_id", "parent_checkpoint_id", "run_id", "type", "checkpoint",
            "metadata", "created_at")
        VALUES (p_thread, p_ns, p_id, p_parent, p_run, p_type, p_checkpoint, p_metadata, p_now)
        ON CONFLICT ("thread_id", "checkpoint_ns", "checkpoint_id") DO UPDATE SET
            "parent_checkpoint_id" = EXCLUDED."parent_checkpoint_id",
            "run_id" = EXCLUDED."run_id", "type" = EXCLUDED."type",
            "checkpoint" = EXCLUDED."checkpoint", "metadata" = EXCLUDED."metadata";
    RETURN QUERY SELECT false, NULL::text, NULL::text[];
END
$put$
"""


def create_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_FUNCTION, params=None)


def drop_function(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"DROP FUNCTION IF EXISTS anvia_django_langgraph_put({ARGUMENT_TYPES})"
        )


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0015_langgraph_blob_deltas")]

    operations = [migrations.RunPython(create_function, drop_function, elidable=False)]
