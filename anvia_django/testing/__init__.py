"""Test helpers shipped with anvia-django: the store conformance suite.

Run it against your own store::

    from anvia_django.testing import MemoryStoreConformance

    class TestMyStore(MemoryStoreConformance):
        @pytest.fixture
        def store(self):
            return MyStore()
"""

from .conformance import MemoryStoreConformance

__all__ = ["MemoryStoreConformance"]
