"""Errors of the memory contract.

None of them shadows Python's built-in ``MemoryError``.
"""

from __future__ import annotations


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


def error_type_name(error: BaseException) -> str:
    """How stores name an error's type: ``ValueError``, ``mypkg.errors.Timeout``."""
    kind = type(error)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
