"""PostgreSQL: ``anvia_django_append`` keeps index plans (``SET enable_seqscan = off``).

The function's cached plans were made from the statistics of the moment; on
tables analysed while empty they scanned whole tables until the connection
closed. The SQL lives in ``anvia_django/persistence/dialects.py``; this
replaces the function with it. Going back leaves it in place: the setting
changes plans, not results.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def replace_functions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from anvia_django.persistence.dialects import create_database_functions

    create_database_functions(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0005_postgresql_append_function")]

    operations = [
        migrations.RunPython(replace_functions, migrations.RunPython.noop, elidable=False)
    ]
