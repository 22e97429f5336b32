"""PostgreSQL: a LangGraph checkpoint is stored by one call of
``anvia_django_langgraph_put`` (``integrations/langgraph/writes.py``), one
round trip where the steps took seven, and its values, their chains and
its pending writes are read by one call of ``anvia_django_langgraph_read``
(``reads.py``), where queries took three. Their SQL is frozen here; as
PL/pgSQL they keep their statements' plans for the connection's life,
which Django's default client-side binding would not.

The read function returns rows in three parts (0: the values asked for,
1: the rows of their chains, 2: the writes in ``writes_sort_key`` order),
read from one snapshot (``STABLE``).

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

READ_ARGUMENT_TYPES = "text, text, text, text[], text[]"
PUT_ARGUMENT_TYPES = (
    "text, text, text, text, text, text, bytea, text, timestamptz, boolean, "
    "text[], text[], text[], bytea[], text[], text[], smallint[], text[], text[]"
)

CREATE_PUT_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_langgraph_put(
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


CREATE_READ_FUNCTION = """CREATE OR REPLACE FUNCTION anvia_django_langgraph_read(
    p_thread text, p_ns text, p_id text, p_channels text[], p_versions text[]
) RETURNS TABLE (
    out_part smallint, out_channel text, out_version text, out_type text, out_blob bytea,
    out_base text, out_anchor text, out_task text, out_idx integer
)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
AS $read$
BEGIN
    RETURN QUERY SELECT 0::smallint, b."channel"::text, b."version"::text, b."type"::text,
            b."blob", b."base_version"::text, b."anchor_version"::text, NULL::text,
            NULL::integer
        FROM "anvia_django_langgraphblob" b
        JOIN unnest(p_channels, p_versions) AS w(channel, version)
            ON b."channel" = w.channel AND b."version" = w.version
        WHERE b."thread_id" = p_thread AND b."checkpoint_ns" = p_ns;
    RETURN QUERY WITH a AS (
            SELECT DISTINCT b."channel", b."anchor_version"
            FROM "anvia_django_langgraphblob" b
            JOIN unnest(p_channels, p_versions) AS w(channel, version)
                ON b."channel" = w.channel AND b."version" = w.version
            WHERE b."thread_id" = p_thread AND b."checkpoint_ns" = p_ns
                AND b."base_version" IS NOT NULL
        )
        SELECT 1::smallint, c."channel"::text, c."version"::text, c."type"::text, c."blob",
            c."base_version"::text, c."anchor_version"::text, NULL::text, NULL::integer
        FROM a JOIN "anvia_django_langgraphblob" c
            ON c."thread_id" = p_thread AND c."checkpoint_ns" = p_ns
                AND c."channel" = a."channel" AND c."anchor_version" = a."anchor_version"
        UNION ALL
        SELECT 1::smallint, c."channel"::text, c."version"::text, c."type"::text, c."blob",
            c."base_version"::text, c."anchor_version"::text, NULL::text, NULL::integer
        FROM a JOIN "anvia_django_langgraphblob" c
            ON c."thread_id" = p_thread AND c."checkpoint_ns" = p_ns
                AND c."channel" = a."channel" AND c."version" = a."anchor_version";
    RETURN QUERY SELECT 2::smallint, w."channel"::text, NULL::text, w."type"::text, w."blob",
            NULL::text, NULL::text, w."task_id"::text, w."idx"
        FROM "anvia_django_langgraphwrite" w
        WHERE w."thread_id" = p_thread AND w."checkpoint_ns" = p_ns AND w."checkpoint_id" = p_id
        ORDER BY w."task_path", w."task_id", w."idx";
END
$read$
"""


def create_functions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_PUT_FUNCTION, params=None)
        schema_editor.execute(CREATE_READ_FUNCTION, params=None)


def drop_functions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"DROP FUNCTION IF EXISTS anvia_django_langgraph_put({PUT_ARGUMENT_TYPES})"
        )
        schema_editor.execute(
            f"DROP FUNCTION IF EXISTS anvia_django_langgraph_read({READ_ARGUMENT_TYPES})"
        )


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0015_langgraph_blob_deltas")]

    operations = [migrations.RunPython(create_functions, drop_functions, elidable=False)]
