"""JSON schemas for tool parameters, derived from a function's type hints."""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anvia_django.core.memory.types import JsonObject

_SCALARS: dict[Any, JsonObject] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


def parameters_schema(fn: Callable[..., Any]) -> JsonObject:
    """An ``object`` schema with one property per parameter of ``fn``.

    Parameters without a default are required. ``Annotated[T, "text"]`` adds
    ``"text"`` as the property's description. A parameter without a hint
    accepts any JSON value.
    """
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    properties: dict[str, JsonObject] = {}
    required: list[str] = []
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            # A model can only send named JSON arguments; *args/**kwargs cannot
            # be described to it, so refuse them rather than guess.
            raise TypeError(
                f"Tool parameter {name!r} is variadic; give the tool explicit "
                "parameters or pass parameters=... with a JSON schema."
            )
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(f"Tool parameter {name!r} is positional-only; tools take keywords.")
        properties[name] = type_schema(hints[name]) if name in hints else {}
        if parameter.default is parameter.empty:
            required.append(name)
    schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def type_schema(hint: Any) -> JsonObject:
    """The JSON schema of one type hint (``{}``, any value, when unknown)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = dict(type_schema(args[0]))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if hint is Any or hint is object:
        return {}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or origin is types.UnionType:
        return {"anyOf": [type_schema(arg) for arg in args]}
    if origin in (list, set, frozenset, Sequence) or hint in (list, set, frozenset):
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is tuple or hint is tuple:
        return {"type": "array"}
    if origin in (dict, Mapping) or hint is dict:
        if len(args) == 2:
            return {"type": "object", "additionalProperties": type_schema(args[1])}
        return {"type": "object"}
    return {}
