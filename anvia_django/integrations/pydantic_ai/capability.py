"""``DjangoMemory``: a Pydantic AI capability that keeps an agent's history in the store."""

from __future__ import annotations

import uuid
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.capabilities.abstract import (
    AgentNode,
    NodeResult,
    WrapNodeRunHandler,
    WrapRunHandler,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext

from anvia_django.conf import app_settings
from anvia_django.core.memory.options import resolve_memory_options
from anvia_django.core.memory.types import (
    JsonObject,
    MemoryContext,
    MemoryOptions,
    MemorySavePolicy,
    MemoryStore,
)
from anvia_django.core.memory.validation import validate_context
from anvia_django.persistence.scope import scope_key
from anvia_django.store import DjangoMemoryStore

from .recorder import RunRecorder

_CONVERSATION_IDS = uuid.UUID("5b0c7c4e-4a8e-4f61-9a3c-3f6d2b1d7a10")
"""The namespace of the Pydantic AI conversation ids derived from sessions."""


@dataclass
class DjangoMemory(AbstractCapability[Any]):
    """The session's history for every run of the agent it is given to.

    ``Agent(..., capabilities=[DjangoMemory("thread_123", user_id=...)])``,
    or per run: ``agent.run("Hi", capabilities=[DjangoMemory(...)])``.

    - Load: before the run starts, the session's stored history becomes
      the run's message history, unless the run was given one
      (``message_history=`` or ``conversation=``): then that history is
      used as given, and the run's new messages are still saved. With a
      new prompt, a loaded history is repaired as ``repair_messages``
      does (tool calls a failed run left open are closed out).
    - Save: ``save`` is ``"message"``, ``"turn"`` or ``"run"`` (see
      :mod:`.recorder` for when each writes); each append uses the run's
      ``run_id`` as the store's run id.
    - A failed run is recorded with ``record_error`` (all its messages so
      far) and a failed run record; a succeeded one with a run record
      (token usage summed over its responses, the model's name).
    - A run whose ``run_id`` the session already holds (a retried task
      passing the same ``run_id=``) loads the history without that run's
      messages and writes nothing: the first attempt that stored anything
      is the run's record.

    ``store`` is any memory store (default: ``DjangoMemoryStore()``, whose
    ``using``, ``load_limit`` and ``scope`` apply). The conversation is the
    one the store's scope names from ``session_id``, ``user_id`` and
    ``metadata``. Runs that inherit no ``conversation_id`` get one derived
    from the session, the same for each of its runs.
    """

    session_id: str
    _: KW_ONLY
    user_id: str | None = None
    metadata: JsonObject | None = None
    save: MemorySavePolicy = "message"
    store: MemoryStore | None = None
    id: str | None = "anvia_django_memory"
    _recorder: RunRecorder | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.save = resolve_memory_options(MemoryOptions(save_policy=self.save)).save_policy
        self._context = MemoryContext(self.session_id, user_id=self.user_id, metadata=self.metadata)
        validate_context(self._context, app_settings.input_limits)
        if self.store is None:
            self.store = DjangoMemoryStore()
        if isinstance(self.store, DjangoMemoryStore):
            # A missing tenant key is refused here, not at the first run.
            self._scope_key = scope_key(self._context, self.store.scope)
        else:
            self._scope_key = self.user_id or ""

    @property
    def context(self) -> MemoryContext:
        return self._context

    def get_ordering(self) -> CapabilityOrdering:
        # Outside every other capability, so a failure in any of them is recorded.
        return CapabilityOrdering(position="outermost")

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return str(uuid.uuid5(_CONVERSATION_IDS, f"{self._scope_key}\x00{self.session_id}"))

    async def for_run(self, ctx: RunContext[Any]) -> DjangoMemory:
        run = replace(self)
        assert run.store is not None  # __post_init__ set it
        run._recorder = RunRecorder(run.store, run._context, run.save)
        return run

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        recorder = self._run_recorder()
        assert ctx.run_id is not None  # a run always has one
        await recorder.start(
            ctx.run_id,
            ctx.messages,
            getattr(ctx.model, "model_name", None),
            prompted=ctx.prompt is not None,
        )
        try:
            result = await handler()
        except Exception as error:
            await recorder.failed(error)
            raise
        await recorder.succeeded(result.all_messages())
        return result

    async def wrap_node_run(
        self,
        ctx: RunContext[Any],
        *,
        node: AgentNode[Any],
        handler: WrapNodeRunHandler[Any],
    ) -> NodeResult[Any]:
        recorder = self._run_recorder()
        recorder.follow(ctx.messages)
        result = await handler(node)
        await recorder.after_step(ctx.messages)
        return result

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self._run_recorder().before_request(ctx.messages)
        return request_context

    def _run_recorder(self) -> RunRecorder:
        if self._recorder is None:
            raise RuntimeError("DjangoMemory hooks ran outside a run (for_run was not called).")
        return self._recorder
