"""A JSON column that gives back exactly what it was given, on every backend.

Django's ``JSONField`` is ``jsonb`` on PostgreSQL, which rewrites numbers
(``1e308`` comes back as a 309-digit integer) and reorders keys, while
SQLite keeps the text as written. Memory must round-trip unchanged and
behave the same everywhere, so messages are stored as their JSON text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.db import models

from anvia_django.core.memory.validation import dumps


class EncodedJSON(str):
    """JSON text already produced (and validated) by the caller, stored as is."""

    __slots__ = ()


if TYPE_CHECKING:
    _TextField = models.TextField[Any, Any]
else:
    _TextField = models.TextField


class ExactJSONField(_TextField):
    description = "JSON stored as text, read back unchanged"

    if TYPE_CHECKING:
        # What django-stubs reads for the Python type of the model attribute.
        _pyi_private_set_type: Any
        _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, EncodedJSON):
            return json.loads(value)
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, EncodedJSON):
            return str(value)
        return dumps(value)

    def value_to_string(self, obj: models.Model) -> str:
        return dumps(self.value_from_object(obj))
