"""Encryption at rest: the table of wrapped data keys (one per user, or per
conversation without a user). Empty and unused while ANVIA_DJANGO has no
ENCRYPTION setting."""

from django.db import migrations, models

import anvia_django.fields


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0008_conversation_scope")]

    operations = [
        migrations.CreateModel(
            name="DataKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("owner", anvia_django.fields.IdentifierField(max_length=271)),
                ("master_key_id", anvia_django.fields.IdentifierField(max_length=64)),
                ("wrapped_key", anvia_django.fields.IdentifierField(max_length=128)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "data key",
                "default_permissions": (),
                "constraints": [
                    models.UniqueConstraint(fields=("owner",), name="anvia_datakey_owner_uniq")
                ],
            },
        ),
    ]
