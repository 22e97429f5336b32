"""One run: load history, loop model and tool turns, save by the policy."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from anvia_django.core.memory.errors import ConversationScopeError, MemoryNotConfiguredError
from anvia_django.core.memory.run_records import MemoryRunInput, RunStatus, TokenUsage
from anvia_django.core.memory.types import MemoryContext, MemoryErrorInput, MemoryStore, Message

from .compaction import compact_if_over_budget, load_history
from .conversation import repair_tool_exchanges, tool_calls_of
from .errors import InvalidModelOutputError, TurnLimitExceededError
from .model import ask_model, model_name
from .recorder import RunRecorder
from .tools import Tool, error_text, result_text, tool_result_message

if TYPE_CHECKING:
    from .agent import Agent

logger = logging.getLogger("anvia_django.runtime")


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The outcome of one run."""

    output: str
    """The final assistant message's text."""
    messages: list[Message]
    """Every message of this run, in order: the user message first."""
    run_id: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    """The token usage the model reported over the run's turns (``None``
    counts when it reported none)."""
    model: str | None = None


async def execute_run(agent: Agent, context: MemoryContext, text: str) -> AgentResponse:
    if agent.memory is None:  # Agent.session() checks this; a hand-made session may not
        raise MemoryNotConfiguredError(f"Agent {agent.name!r} has no memory.")
    store = agent.memory.store
    run_id = uuid.uuid4().hex
    recorder = RunRecorder(store, context, run_id, agent.memory.options.save_policy)
    user: Message = {"role": "user", "content": text}
    started_at = datetime.now(UTC)
    usage = TokenUsage()
    name = model_name(agent.model)
    try:
        history = await compact_if_over_budget(
            agent.compaction,
            store,
            context,
            agent.model,
            await load_history(agent.compaction, store, context),
        )
        history = repair_tool_exchanges(history)
        await recorder.add(1, user)
        prefix: list[Message] = (
            [{"role": "system", "content": agent.instructions}] if agent.instructions else []
        )
        tools = {tool.name: tool for tool in agent.tools}
        specs = [tool.spec for tool in agent.tools]
        for turn in range(1, agent.max_turns + 1):
            answer = await ask_model(agent.model, [*prefix, *history, *recorder.messages], specs)
            usage += answer.usage or TokenUsage()
            name = answer.model or name
            reply = _check_reply(answer.message)
            await recorder.add(turn, reply)
            calls = tool_calls_of(reply)
            if not calls:
                await recorder.finish(turn)
                response = AgentResponse(
                    output_text(reply), list(recorder.messages), run_id, usage, name
                )
                run = _run_input(context, run_id, "succeeded", started_at, name, usage, recorder)
                await _record_run(store, run, None)
                return response
            for call in calls:
                await recorder.add(turn, await _call_tool(tools, call))
            await recorder.end_turn(turn)
        raise TurnLimitExceededError(agent.max_turns)
    except Exception as error:
        # BaseException (cancellation, KeyboardInterrupt, SystemExit) is left
        # alone on purpose: it is treated like a killed process, and awaiting
        # the store while being cancelled would only delay the cancellation.
        if isinstance(error, ConversationScopeError):
            # Another user's conversation: the store refuses every write under
            # this context, so a failed-run record (and a warning for each
            # refused record) would only be noise for what is a 404.
            raise
        await _record_failure(store, context, run_id, error, recorder.messages or [user])
        run = _run_input(context, run_id, "failed", started_at, name, usage, recorder)
        await _record_run(store, run, error)
        raise


def _run_input(
    context: MemoryContext,
    run_id: str,
    status: RunStatus,
    started_at: datetime,
    model: str | None,
    usage: TokenUsage,
    recorder: RunRecorder,
) -> MemoryRunInput:
    return MemoryRunInput(
        context=context,
        run_id=run_id,
        status=status,
        started_at=started_at,
        finished_at=max(started_at, datetime.now(UTC)),
        model=model,
        usage=usage if usage.reported else None,
        message_count=recorder.saved,
    )


async def _record_run(store: MemoryStore, run: MemoryRunInput, error: Exception | None) -> None:
    """Give the store its run record, when it keeps them.

    Never fails the run: by now its messages are saved (or its error is
    about to be raised), and a caller that retried a succeeded run because
    its bookkeeping failed would duplicate the conversation.
    """
    record_run = getattr(store, "record_run", None)
    if not callable(record_run):
        return
    try:
        await record_run(run)
    except Exception as failure:
        if error is not None:
            error.add_note(f"record_run also failed: {type(failure).__name__}: {failure}")
        logger.warning("record_run failed for run %s", run.run_id, exc_info=failure)


async def _record_failure(
    store: MemoryStore,
    context: MemoryContext,
    run_id: str,
    error: Exception,
    messages: list[Message],
) -> None:
    record_error = getattr(store, "record_error", None)
    if not callable(record_error):
        return
    try:
        await record_error(MemoryErrorInput(context, run_id, error, list(messages)))
    except Exception as failure:
        # The caller must see why the run failed, not why recording it did.
        error.add_note(f"record_error also failed: {type(failure).__name__}: {failure}")
        logger.warning("record_error failed for run %s", run_id, exc_info=failure)


def _check_reply(reply: object) -> Message:
    if not isinstance(reply, dict):
        raise InvalidModelOutputError(
            f"The chat model returned {type(reply).__name__}, not a message dict."
        )
    role = reply.get("role", "assistant")
    if role != "assistant":
        raise InvalidModelOutputError(f"The chat model returned a {role!r} message.")
    calls = reply.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise InvalidModelOutputError("tool_calls must be a list.")
        ids = [c.get("id") if isinstance(c, dict) else None for c in calls]
        for call, call_id in zip(calls, ids, strict=True):
            if not isinstance(call_id, str) or not call_id:
                raise InvalidModelOutputError("Every tool call needs a non-empty string id.")
            if not isinstance(call.get("name"), str):
                raise InvalidModelOutputError(f"Tool call {call_id!r} has no string name.")
        if len(set(ids)) != len(ids):
            raise InvalidModelOutputError("Tool call ids must be unique within a message.")
    return reply if "role" in reply else {"role": "assistant", **reply}


async def _call_tool(tools: Mapping[str, Tool], call: Mapping[str, Any]) -> Message:
    name: str = call["name"]
    tool = tools.get(name)
    arguments = call.get("arguments")
    if tool is None:
        available = ", ".join(sorted(tools)) or "none"
        content = f"Error: unknown tool {name!r}; available tools: {available}."
    elif arguments is not None and not isinstance(arguments, dict):
        content = "Error: the tool arguments must be a JSON object."
    else:
        try:
            content = result_text(await tool.invoke(arguments or {}))
        except Exception as error:
            # The model gets to see the failure and try again or explain.
            content = error_text(error)
    return tool_result_message(call["id"], name, content)


def output_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        # Multi-part content: keep the text parts, in order.
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""
