"""A string inside a JSON text column, in each backend's JSON functions."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Expression, F, Func, TextField

from anvia_django.persistence.dialects.collation import exact_collation


class MetadataString(Func):
    """The string at ``path`` in ``Conversation.metadata`` (or ``field``), else NULL."""

    output_field = TextField()

    def __init__(self, path: str, field: str = "metadata") -> None:
        super().__init__(F(field))
        self.path = path
        self.keys = path.split(".")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def _column(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        expression: Expression = self.get_source_expressions()[0]
        sql, params = compiler.compile(expression)
        return sql, list(params)

    def _json_path(self) -> str:
        # '$."org"."id"': each key quoted, so dots and quotes in names are safe.
        return "$" + "".join(f".{json.dumps(key)}" for key in self.keys)

    def as_sql(
        self,
        compiler: Any,
        connection: Any,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no SQL for {connection.vendor}")

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        column, params = self._column(compiler, connection)
        path = self._json_path()
        sql = f"(CASE WHEN JSON_TYPE({column}, %s) = 'text' THEN JSON_EXTRACT({column}, %s) END)"
        return sql, [*params, path, *params, path]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        column, params = self._column(compiler, connection)
        value = f"(({column})::jsonb #> %s)"
        sql = f"(CASE WHEN jsonb_typeof({value}) = 'string' THEN {value} #>> '{{}}' END)"
        return sql, [*params, self.keys, *params, self.keys]

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        column, params = self._column(compiler, connection)
        value = f"JSON_EXTRACT({column}, %s)"
        unquoted = f"JSON_UNQUOTE({value})"
        collation = exact_collation(connection)
        if collation is not None:
            # Compared as the ids are: byte for byte, whatever JSON_UNQUOTE returns.
            unquoted = f"CONVERT({unquoted} USING utf8mb4) COLLATE {collation}"
        sql = f"(CASE WHEN JSON_TYPE({value}) = 'STRING' THEN {unquoted} END)"
        path = self._json_path()
        return sql, [*params, path, *params, path]
