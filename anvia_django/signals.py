"""Signals sent after the transaction that made a change commits.

Receivers get keyword arguments only; ``sender`` is the ``Conversation`` model.

``messages_appended``: ``session_id``, ``ref``, ``user_id``, ``run_id``,
``turn``, ``first_position``, ``messages`` (the list as appended), ``using``.

``message_popped``: ``session_id``, ``ref``, ``user_id``, ``position`` (of
the removed message, the highest), ``message``, ``using``.

``conversation_cleared``: ``session_id``, ``ref``, ``user_id``, ``using``.

``run_failed``: ``session_id``, ``ref``, ``user_id``, ``run_id``,
``error_type``, ``using``.
"""

from django.dispatch import Signal

messages_appended = Signal()
message_popped = Signal()
conversation_cleared = Signal()
run_failed = Signal()
