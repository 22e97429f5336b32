"""``manage.py seed_demo``: a few demo conversations, through the demo agent."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management import BaseCommand

from example_project.demo.agent import demo_agent
from example_project.demo.seeding import seed


class Command(BaseCommand):
    help = "Seed demo conversations through the demo agent (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        result = async_to_sync(seed)(demo_agent())
        self.stdout.write(
            f"Seeded {len(result.seeded)} demo conversation(s); "
            f"{len(result.skipped)} already there."
        )
        if options["verbosity"] >= 2:
            for session_id in result.seeded:
                self.stdout.write(f"  seeded {session_id}")
