"""Columns that give back exactly what they were given, on every backend.

Django's ``JSONField`` is ``jsonb`` on PostgreSQL, which rewrites numbers
(``1e308`` comes back as a 309-digit integer) and reorders keys, while
SQLite keeps the text as written. Memory must round-trip unchanged and
behave the same everywhere, so messages are stored as their JSON text.

Ids and text must compare and store the same everywhere too. MySQL and
MariaDB default to case-insensitive collations ("Abc" and "abc" would be one
session, and ``user_id`` filters would match other users) and may default to
3-byte UTF-8; there these columns get the binary utf8mb4 collation the
database dialect names. Elsewhere they are plain ``CharField``/``TextField``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.db import models, router

from anvia_django.core.memory.validation import dumps, loads


class EncodedJSON(str):
    """JSON text already produced (and validated) by the caller, stored as is."""

    __slots__ = ()


if TYPE_CHECKING:
    _TextField = models.TextField[Any, Any]
    _CharField = models.CharField[Any, Any]
else:
    _TextField = models.TextField
    _CharField = models.CharField


def _with_exact_collation(params: dict[str, Any], connection: Any) -> dict[str, Any]:
    collation = exact_collation(connection)
    return params if collation is None else {**params, "collation": collation}


class IdentifierField(_CharField):
    """An id compared byte for byte: case and trailing spaces matter everywhere."""

    description = "Identifier compared exactly"

    if TYPE_CHECKING:
        _pyi_private_set_type: str
        _pyi_private_get_type: str

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        return _with_exact_collation(super().db_parameters(connection), connection)


class ExactTextField(_TextField):
    """Text stored as given, 4-byte UTF-8 included, on every backend."""

    description = "Text stored exactly"

    if TYPE_CHECKING:
        _pyi_private_set_type: str
        _pyi_private_get_type: str

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        return _with_exact_collation(super().db_parameters(connection), connection)


class ExactJSONField(ExactTextField):
    description = "JSON stored as text, read back unchanged"

    if TYPE_CHECKING:
        # What django-stubs reads for the Python type of the model attribute.
        _pyi_private_set_type: Any
        _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else loads(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, EncodedJSON):
            return loads(value)
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, EncodedJSON):
            return str(value)
        return dumps(value)

    def value_to_string(self, obj: models.Model) -> str:
        return dumps(self.value_from_object(obj))


class SealedJSONField(ExactJSONField):
    """An :class:`ExactJSONField` whose value is stored as the codec of its
    database stores it (sealed, with encryption at rest on), also when saved
    through the ORM. The same column as its parent: migrations see an
    ``ExactJSONField``."""

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "anvia_django.fields.ExactJSONField", args, kwargs

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = super().pre_save(model_instance, add)
        alias = model_instance._state.db or router.db_for_write(
            type(model_instance), instance=model_instance
        )
        return codec_for(alias).value_to_save(model_instance, value)


def _not_connected(*args: Any) -> Any:
    raise ImproperlyConfigured(
        "anvia_django is not in INSTALLED_APPS: its fields are not connected"
    )


# What the fields and models ask of the persistence code, which imports
# them and so cannot be imported by them: connected by AnviaDjangoConfig.ready().
codec_for: Callable[[str], Any] = _not_connected
"""The codec of a database (``anvia_django.persistence.codec.codec_for``):
how sealed values are written and read."""
exact_collation: Callable[[Any], str | None] = _not_connected
"""The collation that compares ids byte for byte on a connection, or
``None`` where the database's own does
(``anvia_django.persistence.dialects.collation.exact_collation``)."""
