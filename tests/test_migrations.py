from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree() -> None:
    # Fails when a model change ships without its migration.
    call_command("makemigrations", "anvia_django", "--check", "--dry-run", stdout=StringIO())
