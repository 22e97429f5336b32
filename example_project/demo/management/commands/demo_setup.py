"""``manage.py demo_setup``: a local staff account for the admin and the API.

Creates the user ``demo`` (or refreshes it) with every view permission of
anvia_django (conversations, messages, runs, failed runs, summaries: what
the admin and the API show), sets a password and prints it. For a local
demo only.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import BaseCommand, CommandParser
from django.db import transaction


class Command(BaseCommand):
    help = "Create or refresh the local staff account 'demo' and print its credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password",
            default=os.environ.get("DEMO_PASSWORD"),
            help="Default: $DEMO_PASSWORD, else a new random password on every run.",
        )

    def handle(self, *args: Any, username: str, password: str | None, **options: Any) -> None:
        password = password or secrets.token_urlsafe(12)
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            user.is_staff = True
            user.is_active = True
            user.set_password(password)
            user.save()
            user.user_permissions.add(
                *Permission.objects.filter(
                    content_type__app_label="anvia_django", codename__startswith="view_"
                )
            )
        action = "Created" if created else "Refreshed"
        self.stdout.write(f"{action} staff account (view-only on agent memory):")
        self.stdout.write(f"  username: {username}")
        self.stdout.write(f"  password: {password}")
