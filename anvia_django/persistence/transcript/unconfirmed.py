"""Appends that may be stored although their caller saw an error, so that
``messages_appended`` still goes out for them, once.

The signal is sent when the COMMIT's answer arrives. When the answer is
lost (the connection dies while the server commits), the messages are
stored and nobody was told: the caller sees a connection error, and the
retry (the store's own reconnect, a group's appends run again alone, the
caller's next call with the same input) finds the messages stored and,
being a retry, writes nothing.

So this process remembers each append whose outcome it could not see (an
error at its COMMIT, or from the one statement that was its transaction),
until a later append with the same session, scope, run, turn and messages
settles it:

- one that finds the messages stored, written no earlier than the
  remembered append began, sends the signal for them (:func:`claim`);
- one that stores them itself sends its own signal, and the remembered
  appends are forgotten (:func:`settle`): had one of them been stored, the
  retry check would have found it and nothing would have been written.

An append that found its messages stored with nothing remembered sends
nothing: they were stored, and signalled, by an append that saw its commit.
What this cannot cover: the retry running in another process than the
append that lost its answer (that process died), whose signal is then
never sent. Memory is bounded: at most :data:`REMEMBERED` appends, the
oldest forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

from anvia_django.persistence.dialects import AppendRequest

REMEMBERED = 1024
"""Appends of unknown outcome kept per process; the oldest go first."""

_Key = tuple[str, str, str, str, int, tuple[str, ...]]

_lock = threading.Lock()
_began: OrderedDict[_Key, datetime] = OrderedDict()
"""Each remembered append's key, and when the earliest attempt of it began."""


def _key(alias: str, append: AppendRequest) -> _Key:
    return (
        alias,
        append.session_id,
        append.scope_key,
        append.run_id,
        append.turn,
        tuple(append.encoded),
    )


def remember(alias: str, append: AppendRequest) -> None:
    """``append`` failed in a way that may have left it stored."""
    key = _key(alias, append)
    with _lock:
        began = _began.pop(key, append.now)
        _began[key] = min(began, append.now)
        while len(_began) > REMEMBERED:
            _began.popitem(last=False)


def any_remembered() -> bool:
    """Whether :func:`claim` and :func:`settle` have anything to do (the
    common case: no, and appends skip them)."""
    return bool(_began)


def remembered(alias: str, append: AppendRequest) -> bool:
    return _key(alias, append) in _began


def claim(alias: str, append: AppendRequest, stored_at: datetime) -> bool:
    """Whether the signal for ``append``, found stored as written at
    ``stored_at``, is still owed; forgets it either way."""
    with _lock:
        began = _began.pop(_key(alias, append), None)
    return began is not None and began <= stored_at


def settle(alias: str, append: AppendRequest) -> None:
    """``append`` was stored by this call, which signals it."""
    with _lock:
        _began.pop(_key(alias, append), None)
