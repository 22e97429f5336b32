"""Google ADK sessions beside their conversations: session, app and user
state, and each event's timestamp by position (the events themselves are
the conversations' messages)."""

import django.db.models.deletion
from django.db import migrations, models

import anvia_django.fields


class Migration(migrations.Migration):
    dependencies = [
        ("anvia_django", "0013_langgraph_store"),
    ]

    operations = [
        migrations.CreateModel(
            name="AdkAppState",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("app_scope", anvia_django.fields.IdentifierField(max_length=255)),
                ("state", anvia_django.fields.ExactJSONField(default=dict)),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "ADK app state",
                "constraints": [
                    models.UniqueConstraint(fields=("app_scope",), name="anvia_adk_app_state_uniq")
                ],
            },
        ),
        migrations.CreateModel(
            name="AdkUserState",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("app_scope", anvia_django.fields.IdentifierField(max_length=255)),
                ("user_id", anvia_django.fields.IdentifierField(max_length=255)),
                ("state", anvia_django.fields.ExactJSONField(default=dict)),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "ADK user state",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("app_scope", "user_id"), name="anvia_adk_user_state_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="AdkEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.PositiveBigIntegerField()),
                ("event_id", anvia_django.fields.IdentifierField(max_length=255)),
                ("timestamp", models.FloatField()),
                (
                    "conversation",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="anvia_django.conversation",
                    ),
                ),
            ],
            options={
                "verbose_name": "ADK event",
                "indexes": [
                    models.Index(
                        fields=["conversation", "timestamp"], name="anvia_adk_event_time_idx"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("conversation", "position"), name="anvia_adk_event_position_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="AdkSession",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("app_scope", anvia_django.fields.IdentifierField(max_length=255)),
                ("app_name", anvia_django.fields.IdentifierField(max_length=255)),
                ("user_id", anvia_django.fields.IdentifierField(max_length=255)),
                ("state", anvia_django.fields.ExactJSONField(default=dict)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                (
                    "conversation",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="adk_session",
                        to="anvia_django.conversation",
                    ),
                ),
            ],
            options={
                "verbose_name": "ADK session",
                "indexes": [
                    models.Index(
                        fields=["app_scope", "updated_at", "id"], name="anvia_adk_app_updated_idx"
                    ),
                    models.Index(
                        fields=["app_scope", "user_id", "updated_at", "id"],
                        name="anvia_adk_user_updated_idx",
                    ),
                ],
            },
        ),
    ]
