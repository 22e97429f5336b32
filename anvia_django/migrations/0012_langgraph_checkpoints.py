"""LangGraph's checkpoints (anvia_django/integrations/langgraph/): checkpoints,
their channel values stored once per version, and pending writes."""

from django.db import migrations, models

import anvia_django.fields


class Migration(migrations.Migration):
    dependencies = [
        ("anvia_django", "0011_search_index_follows_updates"),
    ]

    operations = [
        migrations.CreateModel(
            name="LangGraphBlob",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("thread_id", anvia_django.fields.IdentifierField(max_length=255)),
                (
                    "checkpoint_ns",
                    anvia_django.fields.IdentifierField(blank=True, default="", max_length=255),
                ),
                ("channel", anvia_django.fields.IdentifierField(max_length=128)),
                ("version", anvia_django.fields.IdentifierField(max_length=64)),
                ("type", anvia_django.fields.IdentifierField(max_length=32)),
                ("blob", models.BinaryField(null=True)),
            ],
            options={
                "verbose_name": "LangGraph channel value",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("thread_id", "checkpoint_ns", "channel", "version"),
                        name="anvia_lg_blob_uniq",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="LangGraphCheckpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("thread_id", anvia_django.fields.IdentifierField(max_length=255)),
                (
                    "checkpoint_ns",
                    anvia_django.fields.IdentifierField(blank=True, default="", max_length=255),
                ),
                ("checkpoint_id", anvia_django.fields.IdentifierField(max_length=64)),
                (
                    "parent_checkpoint_id",
                    anvia_django.fields.IdentifierField(blank=True, max_length=64, null=True),
                ),
                (
                    "run_id",
                    anvia_django.fields.IdentifierField(blank=True, max_length=255, null=True),
                ),
                ("type", anvia_django.fields.IdentifierField(max_length=32)),
                ("checkpoint", models.BinaryField()),
                ("metadata", anvia_django.fields.ExactJSONField(default=dict)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "LangGraph checkpoint",
                "indexes": [
                    models.Index(fields=["run_id"], name="anvia_lg_checkpoint_run_idx"),
                    models.Index(fields=["checkpoint_id"], name="anvia_lg_checkpoint_id_idx"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("thread_id", "checkpoint_ns", "checkpoint_id"),
                        name="anvia_lg_checkpoint_uniq",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="LangGraphWrite",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("thread_id", anvia_django.fields.IdentifierField(max_length=255)),
                (
                    "checkpoint_ns",
                    anvia_django.fields.IdentifierField(blank=True, default="", max_length=255),
                ),
                ("checkpoint_id", anvia_django.fields.IdentifierField(max_length=64)),
                ("task_id", anvia_django.fields.IdentifierField(max_length=128)),
                ("idx", models.IntegerField()),
                (
                    "task_path",
                    anvia_django.fields.IdentifierField(blank=True, default="", max_length=255),
                ),
                ("channel", anvia_django.fields.IdentifierField(max_length=255)),
                ("type", anvia_django.fields.IdentifierField(max_length=32)),
                ("blob", models.BinaryField(null=True)),
            ],
            options={
                "verbose_name": "LangGraph pending write",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
                        name="anvia_lg_write_uniq",
                    )
                ],
            },
        ),
    ]
