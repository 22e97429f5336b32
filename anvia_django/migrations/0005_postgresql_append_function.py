"""PostgreSQL: the append as one database function (``anvia_django_append``).

Other databases get nothing. The SQL lives in
``anvia_django/persistence/dialects.py``, which calls the function; until
this migration has run, appends there run in steps, as elsewhere.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def create_functions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from anvia_django.persistence.dialects import create_database_functions

    create_database_functions(schema_editor.connection)


def drop_functions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from anvia_django.persistence.dialects import drop_database_functions

    drop_database_functions(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("anvia_django", "0004_runs_forks_summaries")]

    operations = [migrations.RunPython(create_functions, drop_functions, elidable=False)]
