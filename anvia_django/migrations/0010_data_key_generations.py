"""Encryption at rest: an owner may hold several data keys while
``anvia_memory rotate-keys --reencrypt`` moves its messages to a new one.

The key of an owner is now unique per generation (its current key is the
highest); ``created_under`` records the master key current when a key was
made (re-wrapping leaves it), for existing keys the one wrapping them now.
A plain unique pair: MariaDB has no partial unique indexes.

Going back is refused while the key table holds keys: migration 0009 then
drops the table, and every message sealed under them could never be read
again. (It also fails while an owner holds two generations: the unique
owner constraint returns.)
"""

from typing import Any

from django.db import migrations, models
from django.db.models import F

import anvia_django.fields


def refuse_while_keys_exist(apps: Any, schema_editor: Any) -> None:
    data_key = apps.get_model("anvia_django", "DataKey")
    held = data_key.objects.using(schema_editor.connection.alias).count()
    if held:
        raise RuntimeError(
            f"anvia_django: the data key table of database {schema_editor.connection.alias!r} "
            f"holds {held} key(s). Going back past migration 0009 drops it, and every message "
            "sealed under them could never be read again. Delete the keys first if that is "
            "what you mean."
        )


def created_under_current_wrapper(apps: Any, schema_editor: Any) -> None:
    data_key = apps.get_model("anvia_django", "DataKey")
    data_key.objects.using(schema_editor.connection.alias).update(created_under=F("master_key_id"))


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0009_data_keys")]

    operations = [
        migrations.AddField(
            model_name="datakey",
            name="generation",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="datakey",
            name="created_under",
            field=anvia_django.fields.IdentifierField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(
            created_under_current_wrapper,
            migrations.RunPython.noop,
            # Routers that keep the key table on its own alias see which table.
            hints={"model_name": "datakey"},
        ),
        migrations.RemoveConstraint(model_name="datakey", name="anvia_datakey_owner_uniq"),
        migrations.AddConstraint(
            model_name="datakey",
            constraint=models.UniqueConstraint(
                fields=("owner", "generation"), name="anvia_datakey_owner_generation_uniq"
            ),
        ),
        # Last, so that going back checks first, before anything changed.
        migrations.RunPython(
            migrations.RunPython.noop, refuse_while_keys_exist, hints={"model_name": "datakey"}
        ),
    ]
