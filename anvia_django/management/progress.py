"""Progress lines on stderr for long exports and prunes.

Verbosity 0 prints nothing; 1 prints progress only to a terminal, updating
one line in place; 2 and up print one line per batch, also when redirected.
"""

from __future__ import annotations

from django.core.management.base import OutputWrapper


def plain(text: str) -> str:
    """No styling: Django paints stderr red, which progress is not."""
    return text


class Progress:
    def __init__(self, stream: OutputWrapper, verbosity: int, *, label: str) -> None:
        self._stream = stream
        self._label = label
        interactive = stream.isatty()
        self._enabled = verbosity >= 2 or (verbosity == 1 and interactive)
        self._in_place = verbosity == 1 and interactive
        self._dirty = False

    def update(self, text: str) -> None:
        if not self._enabled:
            return
        if self._in_place:
            self._stream.write(f"\r\033[K{self._label}: {text}", style_func=plain, ending="")
            self._dirty = True
        else:
            self._stream.write(f"{self._label}: {text}", style_func=plain)
        self._stream.flush()

    def done(self) -> None:
        """End the in-place line, so what follows starts on a fresh one."""
        if self._dirty:
            self._stream.write("", style_func=plain)
            self._stream.flush()
            self._dirty = False
