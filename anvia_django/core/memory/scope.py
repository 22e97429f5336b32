"""Which conversation a context names: its scope.

As in Anvia's adapters, a conversation is found by its session id together
with a scope key made from the context: by default the user id, plus the
metadata values the application names (tenants), or a function of the
context that returns a stable string. Two tenants that use the same session
id therefore get two conversations.

A scope is not authorization: it keeps conversations apart that carry
different values, and relies on the application to put the right values in
the context.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMemoryInputError
from .types import MemoryContext

SCOPE_KEY_MAX_LENGTH = 255
"""Longest scope key kept as it is; a longer one is stored as its SHA-256."""

HASHED_PREFIX = "sha256:"

ScopeFunction = Callable[[MemoryContext], str]


@dataclass(frozen=True)
class ConversationScope:
    """What, besides the session id, tells conversations apart.

    ``user_id``: the context's user id is part of the key (the adapters'
    default). Without it a session id names one conversation, and a context
    naming another user than its owner is refused (``ConversationScopeError``).
    ``metadata_keys``: dotted paths into ``context.metadata`` (``"tenant_id"``,
    ``"org.id"``) whose string values are part of the key; a context lacking
    one is refused before anything is read or written.
    ``function``: instead of both, a function of the context returning a
    stable string, the whole key besides the session id.
    """

    user_id: bool = True
    metadata_keys: tuple[str, ...] = ()
    function: ScopeFunction | None = field(default=None, compare=False)
    function_path: str | None = None
    """The dotted path ``function`` was imported from, when it was."""

    def __post_init__(self) -> None:
        for path in self.metadata_keys:
            if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
                raise ValueError(f"metadata key {path!r} is not a dotted path of names")
        if self.function is not None and (self.user_id or self.metadata_keys):
            raise ValueError("a scope function replaces user_id and metadata_keys; give one form")

    @property
    def owner_checked(self) -> bool:
        """Whether a found conversation's owner must be compared with the
        context's user: only when the user id is not part of the key."""
        return not self.user_id

    def key(self, context: MemoryContext) -> str:
        """The scope key of ``context``; raises ``InvalidMemoryInputError``
        naming what is missing or not a string."""
        if self.function is not None:
            value = self.function(context)
            if not isinstance(value, str):
                raise InvalidMemoryInputError(
                    f"the scope function {self.function_path or self.function!r} returned "
                    f"{type(value).__name__}, not a string",
                    path="context",
                )
            return _bounded(value)
        values: list[str | None] = [context.user_id] if self.user_id else []
        values.extend(_metadata_value(context, path) for path in self.metadata_keys)
        if not self.metadata_keys:
            # The common forms stay readable, and are what the migration
            # that introduced scopes wrote: the user id, or nothing.
            return (context.user_id or "") if self.user_id else ""
        return _bounded(json.dumps(values, ensure_ascii=False, separators=(",", ":")))

    def describe(self) -> str:
        if self.function is not None:
            return f"function {self.function_path or self.function!r}"
        parts = ["session id", *(["user id"] if self.user_id else [])]
        parts.extend(f"metadata {path!r}" for path in self.metadata_keys)
        return " + ".join(parts)


DEFAULT_SCOPE = ConversationScope()


def parse_scope(value: object) -> ConversationScope:
    """A scope from its settings form: a mapping (``{"user_id": True,
    "metadata_keys": ["tenant_id"]}``), a dotted path to a function, a
    function, or a ``ConversationScope``. Raises ``ValueError`` naming what
    is wrong."""
    if isinstance(value, ConversationScope):
        return value
    if value is None:
        return DEFAULT_SCOPE
    if isinstance(value, str):
        return ConversationScope(
            user_id=False, function=import_function(value), function_path=value
        )
    if callable(value):
        return ConversationScope(user_id=False, function=value)
    if not isinstance(value, Mapping):
        raise ValueError(
            f"must be a dict, a dotted path to a function or a function, not {type(value).__name__}"
        )
    unknown = set(value) - {"user_id", "metadata_keys"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; expected user_id and metadata_keys")
    user_id = value.get("user_id", True)
    if not isinstance(user_id, bool):
        raise ValueError(f"user_id must be True or False, not {user_id!r}")
    keys = value.get("metadata_keys", ())
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise ValueError(f"metadata_keys must be a list of dotted paths, not {keys!r}")
    return ConversationScope(user_id=user_id, metadata_keys=tuple(keys))


def import_function(path: str) -> ScopeFunction:
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"{path!r} is not a dotted path to a function")
    try:
        function: Any = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot import {path!r}: {error}") from error
    if not callable(function):
        raise ValueError(f"{path!r} is not callable")
    return function  # type: ignore[no-any-return]


def _metadata_value(context: MemoryContext, path: str) -> str:
    value: object = context.metadata
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InvalidMemoryInputError(
                f"has no {path!r}, which the conversation scope needs (ANVIA_DJANGO['SCOPE'])",
                path="context.metadata",
            )
        value = value[part]
    if not isinstance(value, str) or not value:
        raise InvalidMemoryInputError(
            f"{path!r} must be a non-empty string for the conversation scope, not {value!r:.40}",
            path="context.metadata",
        )
    return value


def _bounded(key: str) -> str:
    if len(key) <= SCOPE_KEY_MAX_LENGTH:
        return key
    return HASHED_PREFIX + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
