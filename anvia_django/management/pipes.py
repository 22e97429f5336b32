"""Ending quietly when the reader of stdout goes away (``export | head -1``)."""

from __future__ import annotations

import os
import sys

from django.core.management.base import OutputWrapper

EXIT_BROKEN_PIPE = 128 + 13
"""What a shell reports for a program ended by SIGPIPE, as ``cat`` and ``yes`` are."""


def closed_stdout(stream: OutputWrapper) -> bool:
    """Whether ``stream`` writes to the process's real stdout (not a test's buffer)."""
    return getattr(stream, "_out", None) is sys.stdout


def quiet_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush of
    the buffered, unwritable output does not print a second error at exit
    (the recipe of Python's ``signal`` documentation)."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)
