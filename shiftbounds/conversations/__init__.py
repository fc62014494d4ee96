"""Conversations from any logs, user simulators over chat messages, and their TRL adapters
(docs/conversations.md).

* :mod:`~shiftbounds.conversations.records` — the JSONL / ``datasets.Dataset`` record format
  ``{"id", "goal", "messages": [{"role", "content"}]}``, validated at the boundary, with converters
  from Taskmaster-4, Taskmaster-3 and the synthetic hidden-goal tasks.
"""

from shiftbounds.conversations.records import (
    ROLES,
    Conversation,
    ConversationFormatError,
    Message,
    from_dataset,
    from_hidden_goal,
    from_taskmaster3,
    from_taskmaster4,
    read_conversations,
    to_dataset,
    write_conversations,
)

__all__ = [
    "ROLES",
    "Conversation",
    "ConversationFormatError",
    "Message",
    "from_dataset",
    "from_hidden_goal",
    "from_taskmaster3",
    "from_taskmaster4",
    "read_conversations",
    "to_dataset",
    "write_conversations",
]
