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

# Added with runs, rewind, fork and compaction:
#
# ``messages_rewound``: ``session_id``, ``ref``, ``user_id``, ``to_position``
# (the new message count), ``removed`` (how many messages went), ``using``.
#
# ``conversation_forked``: ``session_id``, ``ref``, ``user_id`` (of the new
# conversation), ``source_session_id``, ``source_ref``, ``position`` (how
# many messages were copied), ``using``.
#
# ``conversation_compacted``: ``session_id``, ``ref``, ``user_id``,
# ``covers_through`` (the last position the new summary covers), ``using``.

messages_rewound = Signal()
conversation_forked = Signal()
conversation_compacted = Signal()
