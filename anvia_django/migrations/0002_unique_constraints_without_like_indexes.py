"""Session id and ref stay unique, through constraints instead of ``unique=True``.

On PostgreSQL ``unique=True`` on a ``CharField`` also creates a
``varchar_pattern_ops`` ``*_like`` index for ``LIKE 'prefix%'`` lookups.
Nothing here runs such a query (sessions and refs are looked up by
equality, which the unique index answers), yet every new conversation paid
for maintaining two extra indexes. The new constraints are added before the
old ones go, so the columns are never without a unique index.
"""

from django.db import migrations, models

import anvia_django.models


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0001_initial")]

    operations = [
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                fields=("session_id",), name="anvia_conv_session_uniq"
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(fields=("ref",), name="anvia_conv_ref_uniq"),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="session_id",
            field=models.CharField(max_length=255),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="ref",
            field=models.CharField(
                default=anvia_django.models.new_ref, editable=False, max_length=32
            ),
        ),
    ]
