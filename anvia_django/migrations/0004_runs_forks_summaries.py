"""Run records with token usage, fork lineage, and compaction summaries.

Additive only: two new tables, and on the conversation table two nullable
columns without defaults or checks (catalog-only changes) and one partial
index that holds forks only. The message table is not touched, so an
upgrade costs the same whatever the number of messages (see CHANGELOG.md).
"""

import django.db.models.deletion
from django.db import migrations, models

import anvia_django.fields


class Migration(migrations.Migration):
    dependencies = [
        ("anvia_django", "0003_exact_collation_for_ids_and_text"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgentRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run_id", anvia_django.fields.IdentifierField(max_length=255)),
                (
                    "status",
                    anvia_django.fields.IdentifierField(
                        choices=[("succeeded", "succeeded"), ("failed", "failed")], max_length=16
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                ("model_name", anvia_django.fields.IdentifierField(blank=True, max_length=255)),
                ("input_tokens", models.PositiveBigIntegerField(blank=True, null=True)),
                ("output_tokens", models.PositiveBigIntegerField(blank=True, null=True)),
                ("total_tokens", models.PositiveBigIntegerField(blank=True, null=True)),
                ("message_count", models.PositiveIntegerField(default=0)),
            ],
            options={
                "verbose_name": "run",
            },
        ),
        migrations.CreateModel(
            name="MemorySummary",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("covers_through", models.PositiveBigIntegerField()),
                ("message", anvia_django.fields.ExactJSONField()),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "summary",
                "verbose_name_plural": "summaries",
            },
        ),
        migrations.AddField(
            model_name="conversation",
            name="forked_at_position",
            field=models.BigIntegerField(
                blank=True,
                help_text="How many of the source's messages the fork copied.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="forked_from",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="forks",
                to="anvia_django.conversation",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("forked_from__isnull", False)),
                fields=["forked_from"],
                name="anvia_conv_forked_from_idx",
            ),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="conversation",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="runs",
                to="anvia_django.conversation",
            ),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="failed_run",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="anvia_django.failedrun",
            ),
        ),
        migrations.AddField(
            model_name="memorysummary",
            name="conversation",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="summaries",
                to="anvia_django.conversation",
            ),
        ),
        migrations.AddIndex(
            model_name="agentrun",
            index=models.Index(fields=["started_at"], name="anvia_run_started_idx"),
        ),
        migrations.AddConstraint(
            model_name="agentrun",
            constraint=models.UniqueConstraint(
                fields=("conversation", "run_id"), name="anvia_run_uniq"
            ),
        ),
        migrations.AddConstraint(
            model_name="memorysummary",
            constraint=models.UniqueConstraint(
                fields=("conversation", "covers_through"), name="anvia_summary_range_uniq"
            ),
        ),
    ]
