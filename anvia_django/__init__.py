"""Durable conversation memory for AI agents, stored in your Django database.

The framework-neutral contract and runtime live in :mod:`anvia_django.core`
(importable without Django). The Django store is :mod:`anvia_django.store`.
"""

__version__ = "0.1.0"
