"""The shipped store conformance suite, with encryption at rest on.

In a run with encryption on throughout (``ANVIA_TEST_ENCRYPTION=1``, the
postgres-encrypted cell), tests/test_store_conformance.py is this suite
already: there this module is not collected (tests/encryption/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from anvia_django.core.memory import MemoryStore
from anvia_django.core.memory.scope import DEFAULT_SCOPE
from anvia_django.store import DjangoMemoryStore
from anvia_django.testing import MemoryStoreConformance
from tests.encryption.support import encryption


@pytest.fixture(autouse=True)
def _encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


@pytest.mark.django_db(transaction=True)
class TestEncryptedConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self) -> DjangoMemoryStore:
        return DjangoMemoryStore(scope=DEFAULT_SCOPE)

    def tenant_store(self, store: MemoryStore) -> MemoryStore:
        return DjangoMemoryStore(scope={"user_id": True, "metadata_keys": ["tenant_id"]})


@pytest.mark.django_db(transaction=True)
class TestEncryptedOwnerCheckedConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self) -> DjangoMemoryStore:
        return DjangoMemoryStore(scope={"user_id": False})

    def tenant_store(self, store: MemoryStore) -> MemoryStore:
        return DjangoMemoryStore(scope={"user_id": False, "metadata_keys": ["tenant_id"]})
