"""DjangoMemoryStore passes the shipped conformance suite (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from anvia_django.store import DjangoMemoryStore
from anvia_django.testing import MemoryStoreConformance


@pytest.mark.django_db(transaction=True)
class TestDjangoMemoryStoreConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self) -> DjangoMemoryStore:
        return DjangoMemoryStore()
