"""The OpenAI-compatible adapter against a stub server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from anvia_django.core import AgentBuilder, InProcessMemoryStore, MemoryContext
from anvia_django.core.adapters.openai_compatible import (
    ChatModelError,
    OpenAICompatibleChatModel,
)

from .stub_server import StubServer, no_proxies, stub

__all__ = ["no_proxies", "stub"]  # fixtures used by the tests below


def weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


def test_a_tool_calling_run_maps_both_ways(stub: StubServer) -> None:
    stub.reply(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        }
    )
    stub.reply({"role": "assistant", "content": "It is sunny in Paris."})
    model = OpenAICompatibleChatModel("gpt-test", base_url=stub.url, api_key="sk-test")
    store = InProcessMemoryStore()
    agent = AgentBuilder("a", model).instructions("Be brief.").tool(weather).memory(store).build()

    response = asyncio.run(agent.session("s").prompt("Weather in Paris?").send())

    assert response.output == "It is sunny in Paris."
    assert response.messages[1]["tool_calls"] == [
        {"id": "call_1", "name": "weather", "arguments": {"city": "Paris"}}
    ]
    (path, headers, first), (_, _, second) = stub.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert first["model"] == "gpt-test"
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    assistant, tool = second["messages"][2:]
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny in Paris"}
    assert asyncio.run(store.load(MemoryContext("s"))) == response.messages


def test_malformed_arguments_reach_the_model_as_an_error_result(stub: StubServer) -> None:
    bad_call = {
        "id": "c",
        "type": "function",
        "function": {"name": "weather", "arguments": "{oops"},
    }
    stub.reply({"role": "assistant", "content": None, "tool_calls": [bad_call]})
    stub.reply({"role": "assistant", "content": "Sorry."})
    model = OpenAICompatibleChatModel("m", base_url=stub.url, api_key="k")
    agent = AgentBuilder("a", model).tool(weather).memory(InProcessMemoryStore()).build()
    response = asyncio.run(agent.session("s").prompt("?").send())
    assert response.messages[2]["content"] == "Error: the tool arguments must be a JSON object."
    # The raw arguments go back to the provider exactly as it sent them.
    assert stub.requests[1][2]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{oops"


def test_http_errors_raise_chat_model_error(stub: StubServer) -> None:
    stub.replies.append((429, {"error": {"message": "rate limited"}}))
    model = OpenAICompatibleChatModel("m", base_url=stub.url, api_key="k")
    with pytest.raises(ChatModelError, match="429") as raised:
        asyncio.run(model.complete([{"role": "user", "content": "hi"}], []))
    assert raised.value.status_code == 429
    assert "tools" not in stub.requests[0][2]


def test_a_body_without_choices_raises(stub: StubServer) -> None:
    stub.replies.append((200, {"object": "error"}))
    model = OpenAICompatibleChatModel("m", base_url=stub.url, api_key="k")
    with pytest.raises(ChatModelError, match="choices"):
        asyncio.run(model.complete([{"role": "user", "content": "hi"}], []))


def test_environment_defaults_and_a_shared_client(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    stub.reply({"role": "assistant", "content": "hi"})

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            model = OpenAICompatibleChatModel("m", client=client, extra_body={"temperature": 0})
            assert "sk-env" not in repr(model)
            return await model.complete([{"role": "user", "content": "hi"}], [])

    assert asyncio.run(scenario()) == {"role": "assistant", "content": "hi"}
    _, headers, body = stub.requests[0]
    assert headers["Authorization"] == "Bearer sk-env"
    assert body["temperature"] == 0
