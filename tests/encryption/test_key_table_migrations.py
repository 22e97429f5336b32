"""Going back past the data key table is refused while it holds keys."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from anvia_django.models import DataKey
from anvia_django.persistence import append_messages
from tests.encryption.support import encryption
from tests.helpers import append_input, user

pytestmark = pytest.mark.django_db(transaction=True)


def test_migrating_back_past_the_key_table_is_refused_while_it_holds_keys() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        append_messages(append_input("s", [user("sealed")], user_id="u1"))
    assert DataKey.objects.count() == 1
    try:
        applied = set(MigrationExecutor(connection).loader.applied_migrations)
        with pytest.raises(
            CommandError, match=r"holds 1 key\(s\)\. Going back past migration 0009"
        ):
            call_command("migrate", "anvia_django", "0009_data_keys", verbosity=0)
        assert set(MigrationExecutor(connection).loader.applied_migrations) == applied
        assert DataKey.objects.count() == 1
        DataKey.objects.all().delete()  # the refusal says how to go on
        call_command("migrate", "anvia_django", "0009_data_keys", verbosity=0)
    finally:
        # Later migrations may have been unapplied (for good on MariaDB,
        # whose DDL is not transactional): later tests need them.
        call_command("migrate", "anvia_django", verbosity=0)
