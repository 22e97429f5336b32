"""W6 and W7: the inspector API through Django's test client, and peak memory.

W6 times whole requests (URL routing, DRF, serializers, JSON rendering)
against the raw driver fetching the same rows and ``json.dumps``-ing the
same body: the ratio is the price of the web stack plus the store's query
code. W7 measures tracemalloc peaks of reading one conversation page by page
through the API and of ``manage.py anvia_memory export``, at two lengths:
memory that does not grow with the conversation is the target.
"""

from __future__ import annotations

import gc
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from anvia_django.conf import app_settings
from anvia_django.persistence import list_conversation_page, resolve_conversation

from .database import empty_tables
from .fixtures import bulk_conversations, bulk_messages
from .raw import Baseline
from .timing import Row, measure

LIST_URL = "/anvia/api/conversations/"
DETAIL_SESSION = "bulk-7"
MEMORY_TARGET = 1.5
"""Largest acceptable peak at the long conversation over the peak at the short one."""


def _next_url(response: Any) -> str | None:
    link = response.headers.get("Link")
    if not link:
        return None
    return str(link.split(">", 1)[0].lstrip("<").removeprefix("http://testserver"))


def _get(client: Client, url: str) -> Any:
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    return response


async def api_rows(bench: Any) -> list[Row]:
    """W6 at ``sizes.api_conversations`` conversations."""
    sizes = bench.sizes
    baseline: Baseline = bench.baseline
    empty_tables()
    bulk_conversations(0, sizes.api_conversations)
    bulk_messages(DETAIL_SESSION, 20)
    client = Client()
    found = await sync_to_async(resolve_conversation)(DETAIL_SESSION)
    assert found is not None
    ref = found.ref
    first = await sync_to_async(_get)(client, f"{LIST_URL}?limit=50")
    second_page = _next_url(first)
    key = (await sync_to_async(list_conversation_page)(50)).next_key
    assert second_page is not None, "more than one page of conversations"
    assert key is not None
    after = (key.moment, key.id)
    detail_limit = app_settings.INSPECTOR_MESSAGES_DEFAULT_LIMIT
    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("list page 1 (50 newest)", f"{LIST_URL}?limit=50", lambda: baseline.list_page(50, None)),
        (
            "list page 1 for one user",
            f"{LIST_URL}?limit=50&userId=user-7",
            lambda: baseline.list_page(50, "user-7"),
        ),
        ("list page 2 (signed cursor)", second_page, lambda: baseline.list_page(50, None, after)),
        (
            "detail (summary + 20 messages)",
            f"{LIST_URL}{ref}/",
            lambda: baseline.detail(ref, detail_limit),
        ),
    ]
    rows = []
    for what, url, raw_call in cases:
        queries = await sync_to_async(_count_queries)(client, url)

        def requests(url: str = url) -> None:
            for _ in range(sizes.api_requests):
                _get(client, url)

        async def store_side(requests: Callable[[], None] = requests) -> None:
            await sync_to_async(requests)()

        async def raw_side(raw_call: Callable[[], Any] = raw_call) -> None:
            for _ in range(sizes.api_requests):
                await raw_call()

        store_s, raw_s = await measure(store_side, raw_side, sizes.read_repeats)
        rows.append(
            Row(
                "W6",
                f"GET {what} at {sizes.api_conversations:,} conversations ({queries} queries)",
                sizes.api_requests,
                store_s,
                raw_s,
                sizes.read_repeats,
                baseline="raw driver + json.dumps",
            )
        )
    return rows


def _count_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        _get(client, url)
    return len(captured.captured_queries)


def _peak(work: Callable[[], object]) -> int:
    """Peak bytes Python allocated while ``work`` ran, beyond what it started with."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - start


def _read_paged(ref: str) -> Callable[[], object]:
    limit = app_settings.INSPECTOR_MESSAGES_MAX_LIMIT

    def walk() -> int:
        client = Client()
        url: str | None = f"{LIST_URL}{ref}/messages/?limit={limit}"
        seen = 0
        while url is not None:
            response = _get(client, url)
            seen += len(response.json())
            url = _next_url(response)
            # The test client ties every response into reference cycles
            # (``response.json`` is a partial holding the response; DRF's
            # view and response point at each other), freed only when the
            # cyclic collector gets round to them. Collecting per page
            # measures what a request holds, not how late the collector runs.
            del response
            gc.collect()
        return seen

    return walk


def _export(session: str, target: Path) -> Callable[[], object]:
    return lambda: call_command(
        "anvia_memory", "export", "--session", session, "--output", str(target), verbosity=0
    )


def memory_rows(sizes: Any) -> list[Row]:
    """W7: peaks at ``memory_small`` and ``memory_large`` messages."""
    peaks: dict[str, dict[int, int]] = {"api": {}, "export": {}}
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "export.jsonl"
        for length in (sizes.memory_small, sizes.memory_large):
            empty_tables()
            bulk_messages("memory", length)
            summary = resolve_conversation("memory")
            assert summary is not None
            assert summary.message_count == length
            walk = _read_paged(summary.ref)
            walk()  # warm: imports, URL resolver and DRF caches are not the subject
            peaks["api"][length] = _peak(walk)
            _export("memory", target)()
            peaks["export"][length] = _peak(_export("memory", target))
            lines = sum(1 for _ in target.open(encoding="utf-8"))
            assert lines == length + 1, "the export holds the conversation and every message"
    small, large = sizes.memory_small, sizes.memory_large
    labels = {
        "api": "peak memory, reading every message through the paged API"
        f" ({app_settings.INSPECTOR_MESSAGES_MAX_LIMIT} a page)",
        "export": "peak memory, `manage.py anvia_memory export --session`",
    }
    return [
        Row(
            "W7",
            f"{labels[kind]}: {large:,} messages",
            large,
            float(peaks[kind][large]),
            float(peaks[kind][small]),
            1,
            target=MEMORY_TARGET,
            baseline=f"same at {small:,} messages",
            unit="bytes",
        )
        for kind in ("api", "export")
    ]
