"""Tools: plain Python callables the model may call by name."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anvia_django.core.memory.types import JsonObject, Message

from .model import ToolSpec
from .schema import parameters_schema

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable with the name, description and schema shown to the model."""

    name: str
    description: str
    parameters: JsonObject
    function: Callable[..., Any]

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    async def invoke(self, arguments: JsonObject) -> Any:
        """Call the function with ``arguments`` as keywords.

        Synchronous functions run in a worker thread, so a tool doing blocking
        I/O (an HTTP call, a Django ORM query) never stalls the event loop.
        """
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**arguments)
        result = await _in_thread(functools.partial(self.function, **arguments))
        if inspect.isawaitable(result):
            # A sync callable returning an awaitable (a functools.partial of
            # an async function, say) is still an async tool.
            return await result
        return result


async def _in_thread(call: Callable[[], Any]) -> Any:
    try:
        from asgiref.sync import sync_to_async
    except ImportError:
        return await asyncio.to_thread(call)
    # asgiref (not Django itself) when installed: under Django it runs the
    # call on the request's sync thread, where Django opens and closes
    # database connections, instead of in a pool thread that would keep its
    # connection open forever.
    return await sync_to_async(call, thread_sensitive=True)()


def make_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: JsonObject | None = None,
) -> Tool:
    """Describe ``function`` as a tool; explicit values win over introspection."""
    if not callable(function):
        raise TypeError(f"A tool must be callable, not {type(function).__name__}.")
    tool_name = name if name is not None else getattr(function, "__name__", "")
    if not isinstance(tool_name, str) or not _NAME.match(tool_name):
        raise ValueError(
            f"Tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'; "
            "pass name=... to choose one."
        )
    if description is None:
        description = _first_paragraph(inspect.getdoc(function))
    if parameters is None:
        parameters = parameters_schema(function)
    elif not isinstance(parameters, dict):
        raise TypeError("parameters must be a JSON schema object (a dict).")
    return Tool(tool_name, description, parameters, function)


def tool_result_message(call_id: str, name: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def error_text(error: BaseException) -> str:
    """What the model sees when a tool fails: enough to recover, no traceback."""
    detail = str(error)
    return (
        f"Error: {type(error).__name__}: {detail}" if detail else f"Error: {type(error).__name__}"
    )


def result_text(result: Any) -> str:
    """A tool's return value as message content: strings as-is, else JSON."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return str(result)


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(doc.split("\n\n", 1)[0].split())
