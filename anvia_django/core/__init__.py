"""The framework-neutral core: the memory contract and the agent runtime.

Nothing under ``anvia_django.core`` imports Django.
"""

from .memory import *  # noqa: F403
from .memory import __all__ as _memory_all
from .runtime import *  # noqa: F403
from .runtime import __all__ as _runtime_all

__all__ = [*_memory_all, *_runtime_all]
