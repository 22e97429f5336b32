"""LangGraph's long-term memory store (DjangoStore): its items, with their TTL."""

from django.db import migrations, models

import anvia_django.fields


class Migration(migrations.Migration):
    dependencies = [
        ("anvia_django", "0012_langgraph_checkpoints"),
    ]

    operations = [
        migrations.CreateModel(
            name="LangGraphStoreItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("namespace", anvia_django.fields.IdentifierField(max_length=500)),
                ("key", anvia_django.fields.IdentifierField(max_length=255)),
                ("value", models.BinaryField()),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("ttl_minutes", models.FloatField(blank=True, null=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "LangGraph store item",
                "indexes": [models.Index(fields=["expires_at"], name="anvia_lg_item_expiry_idx")],
                "constraints": [
                    models.UniqueConstraint(fields=("namespace", "key"), name="anvia_lg_item_uniq")
                ],
            },
        ),
    ]
