"""Demo conversations, sent through the real agent so they are real transcripts."""

from __future__ import annotations

from dataclasses import dataclass

from anvia_django.core import Agent


@dataclass(frozen=True, slots=True)
class Script:
    session_id: str
    user_id: str
    prompts: tuple[str, ...]
    metadata: dict[str, str]


SCRIPTS = (
    Script(
        "demo-alice-espresso",
        "alice",
        ("Hi there!", "Where is my order 1042?", "What did I ask you earlier?"),
        {"channel": "email", "locale": "en-GB"},
    ),
    Script(
        "demo-bob-grinder",
        "bob",
        ("Has order #1043 shipped yet?", "And order 1044?"),
        {"channel": "web"},
    ),
    Script(
        "demo-carol-typo",
        "carol",
        ("Can you check order 9999?", "Sorry, I meant 1045."),
        {"channel": "web"},
    ),
    Script(
        "demo-alice-followup",
        "alice",
        ("Do you remember anything from before?",),
        {"channel": "web"},
    ),
)


@dataclass(frozen=True, slots=True)
class SeedResult:
    seeded: list[str]
    skipped: list[str]


async def seed(agent: Agent, scripts: tuple[Script, ...] = SCRIPTS) -> SeedResult:
    """Play every script whose session has no history yet.

    Idempotent: a session with any history is left alone, so running the
    seeding again (or after a visitor added to a demo session) adds nothing.
    """
    result = SeedResult([], [])
    for script in scripts:
        session = agent.session(script.session_id, user_id=script.user_id, metadata=script.metadata)
        if await session.history():
            result.skipped.append(script.session_id)
            continue
        for prompt in script.prompts:
            await session.prompt(prompt).send()
        result.seeded.append(script.session_id)
    return result
