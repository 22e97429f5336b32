"""Waiting out the writes in flight: every transaction that has written to
the conversation table when the wait begins has ended when it returns.

``--reencrypt`` needs it before it destroys a retired data key. A writer
fetches its data key after it has written its conversation row (the
reservation of every append, the row of a new fork), so a writer that
fetched a key before the key was retired is, from then on, inside such a
transaction. Once they have all ended, whatever they sealed is committed
and visible, and the last sweep reseals it. Per conversation the row lock
would do; a conversation created by such a writer is not visible to lock
until it commits, hence a wait on the table.

Writers that begin during the wait queue behind it for a moment, as behind
any lock; nothing waits on a data key.
"""

from __future__ import annotations

from typing import cast

from django.db import connections, transaction

from anvia_django.models import Conversation


def wait_for_writes_in_flight(alias: str) -> None:
    """Return once every transaction that wrote to the conversation table on
    ``alias`` before this call has committed or rolled back."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    table = quote(Conversation._meta.db_table)
    if connection.vendor == "mysql":
        # LOCK TABLES ... READ waits for the metadata locks every transaction
        # that wrote the table holds until it ends. It commits an open
        # transaction, so it must run outside one.
        if connection.in_atomic_block:
            raise RuntimeError("wait_for_writes_in_flight must not run inside a transaction")
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLES {table} READ")
            cursor.execute("UNLOCK TABLES")
        return
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # One writer at a time: taking the write lock waits for the one
            # in flight. A write statement takes it even when it matches no
            # row (whatever the transaction mode).
            pk = quote(cast(str, Conversation._meta.pk.column))
            cursor.execute(f"UPDATE {table} SET {pk} = {pk} WHERE 0 = 1")
        else:
            # PostgreSQL (and the SQL standard's other databases): SHARE
            # conflicts with the ROW EXCLUSIVE lock every writer of the
            # table holds until its transaction ends.
            cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")
