"""Tools: schemas from type hints, explicit overrides, sync and async calls."""

from __future__ import annotations

import asyncio
import enum
import threading
from typing import Annotated, Any, Literal

import pytest

from anvia_django.core import AgentBuilder, make_tool
from anvia_django.core.runtime.schema import type_schema

from .doubles import RecordingStore, ScriptedModel, assistant


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    query: Annotated[str, "What to look for"],
    limit: int = 10,
    tags: list[str] | None = None,
    mode: Literal["fast", "exact"] = "fast",
    colour: Colour = Colour.RED,
    weights: dict[str, float] | None = None,
    anything: Any = None,
    untyped=None,
) -> list[str]:
    """Search the catalogue.

    Longer text that the model does not need.
    """
    return [query]


def test_schema_from_signature_and_hints() -> None:
    tool = make_tool(search)
    assert tool.name == "search"
    assert tool.description == "Search the catalogue."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "mode": {"enum": ["fast", "exact"]},
            "colour": {"enum": ["red", "blue"]},
            "weights": {
                "anyOf": [
                    {"type": "object", "additionalProperties": {"type": "number"}},
                    {"type": "null"},
                ]
            },
            "anything": {},
            "untyped": {},
        },
        "required": ["query"],
    }


@pytest.mark.parametrize(
    ("hint", "schema"),
    [(bool, {"type": "boolean"}), (float, {"type": "number"}), (tuple, {"type": "array"})],
)
def test_type_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert type_schema(hint) == schema


def test_explicit_name_description_and_parameters_win() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tool = make_tool(search, name="find", description="Find things.", parameters=schema)
    assert (tool.name, tool.description, tool.parameters) == ("find", "Find things.", schema)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dots.not.allowed"])
def test_tool_names_follow_provider_rules(name: str) -> None:
    with pytest.raises(ValueError, match="Tool name"):
        make_tool(search, name=name)


def test_variadic_parameters_are_refused() -> None:
    def loose(*args: int, **kwargs: int) -> None:
        return None

    with pytest.raises(TypeError, match="variadic"):
        make_tool(loose)


def test_duplicate_tool_names_are_refused() -> None:
    builder = AgentBuilder("a", ScriptedModel([])).tool(search)
    with pytest.raises(ValueError, match="already has a tool"):
        builder.tool(search)


def test_sync_tools_run_off_the_loop_and_async_tools_on_it() -> None:
    threads: dict[str, int] = {}

    def blocking(n: int) -> int:
        threads["sync"] = threading.get_ident()
        return n * 2

    async def non_blocking(n: int) -> dict[str, int]:
        threads["async"] = threading.get_ident()
        return {"n": n}

    model = ScriptedModel(
        [
            assistant(None, ("c1", "blocking", {"n": 2}), ("c2", "non_blocking", {"n": 3})),
            assistant("done"),
        ]
    )
    agent = AgentBuilder("a", model).tool(blocking).tool(non_blocking).memory(RecordingStore())
    response = asyncio.run(agent.build().session("s").prompt("go").send())
    assert [m["content"] for m in response.messages if m["role"] == "tool"] == ["4", '{"n": 3}']
    assert threads["async"] == threading.get_ident()
    assert threads["sync"] != threading.get_ident()
    assert [s.name for s in model.tools_seen[0]] == ["blocking", "non_blocking"]
