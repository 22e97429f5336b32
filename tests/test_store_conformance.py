"""DjangoMemoryStore passes the shipped conformance suite, under the default
scope (session id + user id) and the owner-checked one (``{"user_id": False}``)."""

from __future__ import annotations

import pytest

from anvia_django.core.memory import MemoryStore
from anvia_django.core.memory.scope import DEFAULT_SCOPE
from anvia_django.store import DjangoMemoryStore
from anvia_django.testing import MemoryStoreConformance


@pytest.mark.django_db(transaction=True)
class TestDjangoMemoryStoreConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self) -> DjangoMemoryStore:
        return DjangoMemoryStore(scope=DEFAULT_SCOPE)

    def tenant_store(self, store: MemoryStore) -> MemoryStore:
        return DjangoMemoryStore(scope={"user_id": True, "metadata_keys": ["tenant_id"]})


@pytest.mark.django_db(transaction=True)
class TestOwnerCheckedScopeConformance(MemoryStoreConformance):
    """``{"user_id": False}``: one conversation per session id, owner checked."""

    @pytest.fixture
    def store(self) -> DjangoMemoryStore:
        return DjangoMemoryStore(scope={"user_id": False})

    def tenant_store(self, store: MemoryStore) -> MemoryStore:
        return DjangoMemoryStore(scope={"user_id": False, "metadata_keys": ["tenant_id"]})
