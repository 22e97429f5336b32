from __future__ import annotations

import os

# With encryption on for the whole run, tests/test_store_conformance.py runs
# the conformance suite encrypted: this copy would repeat it test for test.
collect_ignore = ["test_conformance.py"] if os.environ.get("ANVIA_TEST_ENCRYPTION") == "1" else []
