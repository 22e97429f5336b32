"""Stopping a run at a chosen point, as a killed process would stop it.

Used by the crash tests of every store: the statements of docs/runtime.md
("what survives a crash") are checked by these scenarios.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from anvia_django.core import AgentBuilder, MemorySavePolicy, MemoryStore, Message

from .doubles import ScriptedModel, assistant, tool_result, user

Point = Literal["after_model_answered", "mid_tool", "before_final_answer"]
POINTS: tuple[Point, ...] = ("after_model_answered", "mid_tool", "before_final_answer")
How = Literal["killed", "cancelled"]

PROMPT = user("Track A1 and B2")
ASK = assistant(None, ("c1", "track", {"order": "A1"}), ("c2", "track", {"order": "B2"}))
R1 = tool_result("c1", "track", "A1: shipped")
R2 = tool_result("c2", "track", "B2: packing")
FINAL = assistant("A1 has shipped; B2 is being packed.")

SURVIVES: dict[tuple[MemorySavePolicy, Point], list[Message]] = {
    ("message", "after_model_answered"): [PROMPT, ASK],
    ("message", "mid_tool"): [PROMPT, ASK, R1],
    ("message", "before_final_answer"): [PROMPT, ASK, R1, R2],
    ("turn", "after_model_answered"): [],
    ("turn", "mid_tool"): [],
    ("turn", "before_final_answer"): [PROMPT, ASK, R1, R2],
    ("run", "after_model_answered"): [],
    ("run", "mid_tool"): [],
    ("run", "before_final_answer"): [],
}


class Killed(BaseException):
    """Stands for the process dying: not an Exception, so nothing handles it."""


async def crash_run(
    store: MemoryStore, policy: MemorySavePolicy, point: Point, how: How, session_id: str
) -> None:
    """Run the two-turn scenario and stop it at ``point``; returns once stopped."""
    entered = asyncio.Event()

    async def stop() -> None:
        if how == "killed":
            raise Killed
        entered.set()
        await asyncio.Event().wait()  # hangs until the task is cancelled

    async def track(order: str) -> str:
        if point == "after_model_answered" or (point == "mid_tool" and order == "B2"):
            await stop()
        return {"A1": "A1: shipped", "B2": "B2: packing"}[order]

    class Model(ScriptedModel):
        async def complete(self, messages, tools):
            if point == "before_final_answer" and len(self.calls) == 1:
                self.calls.append(list(messages))
                await stop()
            return await super().complete(messages, tools)

    agent = AgentBuilder("a", Model([ASK, FINAL])).tool(track).memory(store, save_policy=policy)
    send = agent.build().session(session_id).prompt("Track A1 and B2").send()
    if how == "killed":
        try:
            await send
        except Killed:
            return
        raise AssertionError("the run was not stopped")
    task = asyncio.ensure_future(send)
    # Never wait for a stop point a failed run did not reach: that would hang.
    reached = asyncio.ensure_future(entered.wait())
    await asyncio.wait({task, reached}, return_when=asyncio.FIRST_COMPLETED)
    if not entered.is_set():
        reached.cancel()
        raise AssertionError(f"the run ended before the stop point: {task.exception()!r}")
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return
    raise AssertionError("the run was not stopped")


def well_formed(conversation: list[Message]) -> bool:
    """Every tool call is answered right after its assistant message."""
    awaited: list[str] = []
    for message in conversation:
        if message.get("role") == "tool":
            if not awaited or message.get("tool_call_id") != awaited.pop(0):
                return False
        elif awaited:
            return False
        else:
            awaited = [call["id"] for call in message.get("tool_calls") or []]
    return not awaited
