"""write_to_completion: a cancelled caller learns of the cancellation only
once the write has finished, and a write that then fails is not reported to
the event loop as an unhandled error."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from anvia_django.integrations.cancellation import write_to_completion
from tests.helpers import run


def test_returns_the_result_and_raises_the_error_of_the_write() -> None:
    def add(a: int, b: int, *, using: str | None) -> int:
        return a + b

    assert run(write_to_completion, add, 2, b=3, using=None) == 5

    def fail(*, using: str | None) -> None:
        raise LookupError("from the write")

    with pytest.raises(LookupError, match="from the write"):
        run(write_to_completion, fail, using=None)


@pytest.mark.parametrize("outcome", ["succeeds", "fails"])
def test_a_cancellation_waits_for_the_write_and_hides_a_later_failure(outcome: str) -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def write(*, using: str | None) -> str:
        started.set()
        assert release.wait(10)
        finished.append(outcome)
        if outcome == "fails":
            raise RuntimeError("failed after the caller left")
        return "written"

    async def scenario() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        loop_errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))
        task = asyncio.ensure_future(write_to_completion(write, using=None))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished == [outcome]
        await asyncio.sleep(0)
        return loop_errors

    assert run(scenario) == []
