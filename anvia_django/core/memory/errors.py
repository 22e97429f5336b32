"""Errors of the memory contract.

None of them shadows Python's built-in ``MemoryError``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass


class InvalidMemoryInputError(ValueError):
    """A store call was given input it cannot store as given.

    ``path`` names the offending part (for example ``messages[2]["content"]``)
    without echoing its value, which may be sensitive chat data.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class ConversationScopeError(PermissionError):
    """The context names a user other than the one owning the conversation."""


class MemoryNotConfiguredError(RuntimeError):
    """A session was requested from an agent built without memory."""


class MemoryCapabilityError(NotImplementedError):
    """The store lacks an optional capability (rewind, fork, compaction) a call needs."""


@dataclass(frozen=True, slots=True)
class ErrorDescription:
    """What a store keeps of a failed run's error: text every backend can store."""

    type: str
    message: str
    traceback: str


def describe_error(error: BaseException) -> ErrorDescription:
    """What a store keeps of ``error``; never raises.

    An exception whose ``__str__`` or ``__repr__`` raises, whose type name
    or traceback cannot be formatted, or whose ``__cause__``/``__context__``
    chain loops is still described: each part that fails becomes a
    placeholder naming what could not be formatted. ``error`` is not changed.
    """
    return ErrorDescription(
        type=_safely(lambda: error_type_name(error), "<the error's type name")[:255],
        message=storable_text(_safely(lambda: _message(error), "<the error's message")),
        traceback=storable_text(_safely(lambda: _traceback(error), "<the traceback")),
    )


def _message(error: BaseException) -> str:
    # A plain ``str``: a subclass's own methods could raise later.
    return str.__str__(str(error))


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def _safely(format: Callable[[], str], placeholder: str) -> str:
    """``format()``, or ``placeholder`` with why it failed, if formatting raised."""
    try:
        return format()
    except Exception as failure:
        try:
            reason = type(failure).__qualname__
        except Exception:
            reason = "an error"
        return f"{placeholder} could not be formatted: {reason}>"


def storable_text(text: str) -> str:
    """``text`` without U+0000 and lone surrogates, which PostgreSQL refuses.

    Error text is diagnostic and comes from anywhere (a provider's reply, a
    tool's output), so it is mended rather than refused: refusing would lose
    the whole failed-run record.
    """
    text = text.replace("\x00", "\\x00")
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_type_name(error: BaseException) -> str:
    """How stores name an error's type: ``ValueError``, ``mypkg.errors.Timeout``."""
    kind = type(error)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
