"""Key material held so that nothing prints it.

Django's error pages, the report it mails to admins, and any reporter that
captures local variables show each frame's locals by their ``repr``; with
``DEBUG`` on, ``sensitive_variables`` masks nothing. Master keys, data keys
and the blind index's keys therefore live in a :class:`Secret`, whose
``repr`` and ``str`` name what it is and never its bytes, and are taken
out (:meth:`Secret.reveal`) only inside the expression that hands them to
the cipher, so no frame keeps them in a local of their own.

Free of Django and of ``cryptography``: the keyring parses without either.
"""

from __future__ import annotations

import hmac
from typing import Any, NoReturn


class Secret:
    """Bytes of a key; shown as ``<secret: what>``, never as themselves."""

    __slots__ = ("_value", "what")

    def __init__(self, value: bytes, what: str = "key") -> None:
        self._value = bytes(value)
        self.what = what

    def reveal(self) -> bytes:
        return self._value

    def __len__(self) -> int:
        return len(self._value)

    def __repr__(self) -> str:
        return f"<secret: {self.what}>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value, other._value)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> NoReturn:
        # Pickled into a cache or a task queue, the bytes would leave the process.
        raise TypeError("a Secret is not pickled")

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __copy__(self) -> Secret:
        return self
