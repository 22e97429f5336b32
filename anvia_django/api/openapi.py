"""OpenAPI documentation when drf-spectacular is installed (the ``openapi``
extra); the API works the same without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rest_framework.schemas.inspectors import DefaultSchema

F = TypeVar("F", bound=Callable[..., Any])


def spectacular_available() -> bool:
    try:
        import drf_spectacular  # noqa: F401
    except ImportError:
        return False
    return True


def view_schema() -> Any:
    """drf-spectacular's ``AutoSchema`` for the inspector views, so the
    project's ``DEFAULT_SCHEMA_CLASS`` need not be changed for them."""
    if not spectacular_available():
        return DefaultSchema()
    from .spectacular_docs import InspectorAutoSchema

    return InspectorAutoSchema()


def documented(operation: str) -> Callable[[F], F]:
    """Attach the schema of ``operation`` (see :mod:`.spectacular_docs`)."""
    if not spectacular_available():
        return _unchanged
    from drf_spectacular.utils import extend_schema

    from .spectacular_docs import OPERATIONS, InspectorAutoSchema

    def decorate(function: F) -> F:
        # extend_schema builds on the project's DEFAULT_SCHEMA_CLASS unless the
        # function names its base; naming it spares projects that setting.
        function.schema = InspectorAutoSchema  # type: ignore[attr-defined]
        return extend_schema(**OPERATIONS[operation])(function)

    return decorate


def _unchanged(function: F) -> F:
    return function
