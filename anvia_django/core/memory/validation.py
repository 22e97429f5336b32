"""Checks that store input can be kept exactly as given, on any backend.

Every store runs these before writing anything, so a bad call fails with an
:class:`InvalidMemoryInputError` naming what was wrong and leaves storage
untouched. The rules are those every supported database can honour alike:
JSON objects with string keys, finite numbers, 64-bit integers, and strings
without U+0000 or lone surrogates (PostgreSQL's ``jsonb`` refuses both, so
they are refused everywhere rather than kept on some backends only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidMemoryInputError
from .types import MemoryAppendInput, MemoryContext, MemoryErrorInput, Message

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
TURN_MAX = 2**31 - 1
"""The largest turn every backend's integer column holds."""


@dataclass(frozen=True, slots=True)
class InputLimits:
    """Bounds on what a store accepts; ``None`` lifts a size bound."""

    max_id_length: int = 255
    max_message_bytes: int | None = 8 * 1024 * 1024
    max_depth: int = 100


DEFAULT_LIMITS = InputLimits()


def validate_identifier(value: object, name: str, limits: InputLimits, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise InvalidMemoryInputError(f"must be a string, not {type(value).__name__}", path=name)
    if not value.strip():
        raise InvalidMemoryInputError("must not be empty or whitespace", path=name)
    if len(value) > limits.max_id_length:
        raise InvalidMemoryInputError(
            f"is {len(value)} characters long; the maximum is {limits.max_id_length}",
            path=name,
        )
    _check_text(value, name)


def validate_context(context: object, limits: InputLimits = DEFAULT_LIMITS) -> MemoryContext:
    if not isinstance(context, MemoryContext):
        raise InvalidMemoryInputError(
            f"must be a MemoryContext, not {type(context).__name__}", path="context"
        )
    validate_identifier(context.session_id, "context.session_id", limits, optional=False)
    validate_identifier(context.user_id, "context.user_id", limits, optional=True)
    if context.metadata is not None:
        if not isinstance(context.metadata, dict):
            raise InvalidMemoryInputError(
                f"must be a JSON object, not {type(context.metadata).__name__}",
                path="context.metadata",
            )
        encode_json(context.metadata, "context.metadata", limits)
    return context


def validate_append(input: MemoryAppendInput, limits: InputLimits = DEFAULT_LIMITS) -> list[str]:
    """Validate an append; return each message encoded as compact JSON."""
    if not isinstance(input, MemoryAppendInput):
        raise InvalidMemoryInputError(
            f"must be a MemoryAppendInput, not {type(input).__name__}", path="input"
        )
    validate_context(input.context, limits)
    validate_identifier(input.run_id, "run_id", limits, optional=False)
    if isinstance(input.turn, bool) or not isinstance(input.turn, int):
        raise InvalidMemoryInputError(
            f"must be an int, not {type(input.turn).__name__}", path="turn"
        )
    if not 1 <= input.turn <= TURN_MAX:
        raise InvalidMemoryInputError(
            f"must be a positive integer up to {TURN_MAX} (turns are 1-based)", path="turn"
        )
    return validate_messages(input.messages, limits)


def validate_error_input(
    input: MemoryErrorInput, limits: InputLimits = DEFAULT_LIMITS
) -> list[str]:
    if not isinstance(input, MemoryErrorInput):
        raise InvalidMemoryInputError(
            f"must be a MemoryErrorInput, not {type(input).__name__}", path="input"
        )
    validate_context(input.context, limits)
    validate_identifier(input.run_id, "run_id", limits, optional=False)
    if not isinstance(input.error, BaseException):
        raise InvalidMemoryInputError(
            f"must be an exception, not {type(input.error).__name__}", path="error"
        )
    return validate_messages(input.messages, limits)


def validate_messages(messages: object, limits: InputLimits = DEFAULT_LIMITS) -> list[str]:
    if not isinstance(messages, list):
        raise InvalidMemoryInputError(
            f"must be a list of messages, not {type(messages).__name__}", path="messages"
        )
    return [validate_message(m, f"messages[{i}]", limits) for i, m in enumerate(messages)]


def validate_message(message: object, path: str, limits: InputLimits = DEFAULT_LIMITS) -> str:
    if not isinstance(message, dict):
        raise InvalidMemoryInputError(
            f"must be a JSON object, not {type(message).__name__}", path=path
        )
    role = message.get("role")
    if not isinstance(role, str) or not role.strip():
        raise InvalidMemoryInputError('needs a non-empty string "role"', path=path)
    if len(role) > limits.max_id_length:
        raise InvalidMemoryInputError(
            f"role is {len(role)} characters long; the maximum is {limits.max_id_length}",
            path=path,
        )
    return encode_json(message, path, limits)


def encode_json(value: Message, path: str, limits: InputLimits = DEFAULT_LIMITS) -> str:
    """Check ``value`` round-trips through JSON unchanged, and encode it."""
    _check_tree(value, path, limits.max_depth)
    encoded = dumps(value)
    limit = limits.max_message_bytes
    if limit is not None and len(encoded) * 4 > limit:
        size = len(encoded.encode("utf-8"))
        if size > limit:
            raise InvalidMemoryInputError(
                f"is {size} bytes as JSON; the maximum is {limit}", path=path
            )
    return encoded


# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """The one JSON encoding stores write: compact UTF-8, no NaN. Retries are
    recognised by comparing this text, so every writer must use it."""
    return _ENCODER.encode(value)


_raw_decode = json.JSONDecoder().raw_decode


def loads(text: str) -> Any:
    """``json.loads(text)``, in less than half its time for text that
    :func:`dumps` wrote: ``json.loads`` matches whitespace with a regular
    expression before and after the value, which is most of its cost for a
    short message. Text with surrounding whitespace or errors goes through
    ``json.loads`` itself, so the result (or the error) is always its."""
    if isinstance(text, str):
        try:
            value, end = _raw_decode(text)
        except json.JSONDecodeError:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


_Where = str | tuple["_Where", str | int]
"""Where a value sits: the root's path, or (its container's place, its key).
Joined into a path string only for an error: most values have none."""


def _check_tree(root: Any, root_path: str, max_depth: int) -> None:
    # Iterative, so a deeply nested (or self-referencing) value cannot exhaust
    # the interpreter's stack before we get to say what is wrong with it.
    stack: list[tuple[Any, _Where, int]] = [(root, root_path, 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value or not value.isascii():
                _check_text(value, _path(where))
        elif value is None or value is True or value is False:
            continue
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise InvalidMemoryInputError("integer does not fit in 64 bits", path=_path(where))
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise InvalidMemoryInputError("NaN and infinity are not JSON", path=_path(where))
        elif isinstance(value, dict | list):
            if depth >= max_depth:
                raise InvalidMemoryInputError(
                    f"is nested deeper than {max_depth} levels", path=_path(where)
                )
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise InvalidMemoryInputError(
                            f"has a {type(k).__name__} key; JSON keys are strings",
                            path=_path(where),
                        )
                    if "\x00" in k or not k.isascii():
                        _check_text(k, _path(where), what="key")
                    stack.append((v, (where, k), depth + 1))
            else:
                stack.extend((v, (where, i), depth + 1) for i, v in enumerate(value))
        else:
            raise InvalidMemoryInputError(
                f"{type(value).__name__} is not a JSON value", path=_path(where)
            )


def _check_text(text: str, path: str, *, what: str = "") -> None:
    if "\x00" in text:
        raise InvalidMemoryInputError(
            f"{_subject(what)}contains U+0000, which cannot be stored", path=path
        )
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemoryInputError(
            f"{_subject(what)}contains a lone surrogate, which is not valid Unicode", path=path
        ) from None


def _subject(what: str) -> str:
    return f"{what} " if what else ""


def _path(where: _Where) -> str:
    keys: list[str | int] = []
    while isinstance(where, tuple):
        where, key = where
        keys.append(key)
    return where + "".join(_index(key) for key in reversed(keys))


def _index(key: str | int) -> str:
    return f"[{key}]" if isinstance(key, int) else f"[{json.dumps(key[:40])}]"
