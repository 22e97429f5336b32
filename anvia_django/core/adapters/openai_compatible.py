"""A :class:`~anvia_django.core.ChatModel` for OpenAI-compatible endpoints.

Speaks ``POST {base_url}/chat/completions`` (OpenAI, Azure-style proxies,
vLLM, Ollama, LiteLLM, ...) over ``httpx``. Install with the ``openai``
extra: ``pip install "anvia-django[openai]"``.

Our messages keep tool call arguments as JSON objects
(``{"id", "name", "arguments": {...}}``); the wire format nests them under
``function`` with ``arguments`` as a JSON *string*. The mapping is done
here, both ways, so stored history stays provider-neutral.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import httpx

from anvia_django.core.memory.run_records import TokenUsage
from anvia_django.core.memory.types import JsonObject, Message
from anvia_django.core.runtime.model import ModelReply, ToolSpec

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ChatModelError(RuntimeError):
    """The endpoint refused the request or answered something unusable."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class OpenAICompatibleChatModel:
    """Chat completions over HTTP.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY`` (read when the model is created). ``extra_body`` is
    merged into every request (``temperature``, ``max_tokens``, ...). Pass a
    long-lived ``client`` to share its connection pool; otherwise each call
    opens and closes its own, which is safe across event loops.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        extra_body: JsonObject | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self._client = client

    def __repr__(self) -> str:
        # Never show the key.
        return f"OpenAICompatibleChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def model_name(self) -> str:
        return self.model

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        return (await self.complete_with_usage(messages, tools)).message

    async def complete_with_usage(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        body: JsonObject = {
            **self.extra_body,
            "model": self.model,
            "messages": [to_wire_message(m) for m in messages],
        }
        if tools:
            body["tools"] = [to_wire_tool(t) for t in tools]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = f"{self.base_url}/chat/completions"
        if self._client is not None:
            response = await self._client.post(url, json=body, headers=headers)
        else:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(url, json=body, headers=headers)
        if response.status_code >= 400:
            raise ChatModelError(
                f"{url} answered {response.status_code}: {response.text[:500]}",
                status_code=response.status_code,
            )
        try:
            answer = response.json()
            choice = answer["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise ChatModelError(
                f"{url} answered without choices[0].message", status_code=response.status_code
            ) from error
        served_by = answer.get("model")
        return ModelReply(
            from_wire_message(choice),
            usage_from_wire(answer.get("usage")),
            served_by if isinstance(served_by, str) and served_by.strip() else None,
        )


def usage_from_wire(usage: Any) -> TokenUsage | None:
    """The response's ``usage`` object (``prompt_tokens``, ``completion_tokens``,
    ``total_tokens``); counts that are missing or not whole numbers are unknown."""
    if not isinstance(usage, dict):
        return None

    def count(name: str) -> int | None:
        value = usage.get(name)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        )

    reported = TokenUsage(count("prompt_tokens"), count("completion_tokens"), count("total_tokens"))
    return reported if reported.reported else None


def to_wire_tool(tool: ToolSpec) -> JsonObject:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def to_wire_message(message: Message) -> JsonObject:
    role = message.get("role")
    if role == "tool":
        # The wire's tool message has no "name"; some servers reject extras.
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id"),
            "content": message.get("content") or "",
        }
    wire = {k: v for k, v in message.items() if k != "tool_calls"}
    if role == "assistant" and message.get("tool_calls"):
        wire["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": _encode(call.get("arguments"))},
            }
            for call in message["tool_calls"]
        ]
    return wire


def from_wire_message(wire: Any) -> Message:
    if not isinstance(wire, dict):
        raise ChatModelError("choices[0].message is not an object")
    message: Message = {"role": "assistant", "content": wire.get("content")}
    calls = wire.get("tool_calls")
    if calls:
        message["tool_calls"] = [
            {
                "id": call.get("id"),
                "name": (call.get("function") or {}).get("name"),
                "arguments": _decode((call.get("function") or {}).get("arguments")),
            }
            for call in calls
            if isinstance(call, dict)
        ]
    return message


def _encode(arguments: Any) -> str:
    # Arguments a model sent as invalid JSON are kept as their raw string
    # (see _decode) and go back to the provider exactly as it sent them.
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def _decode(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments if isinstance(arguments, dict) else {}
    if not arguments.strip():
        return {}
    try:
        decoded = json.loads(arguments)
    except ValueError:
        # The runtime answers a non-object with an error result, so the model
        # learns its arguments were malformed and can try again.
        return arguments
    return decoded if isinstance(decoded, dict) else arguments
