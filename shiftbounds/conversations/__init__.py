"""Conversations from any logs, user simulators over chat messages, and their TRL adapters
(docs/conversations.md).

* :mod:`~shiftbounds.conversations.records` — the JSONL / ``datasets.Dataset`` record format
  ``{"id", "goal", "messages": [{"role", "content"}]}``, validated at the boundary, with converters
  from Taskmaster-4, Taskmaster-3 and the synthetic hidden-goal tasks;
* :mod:`~shiftbounds.conversations.simulators` — the ``UserSimulator`` protocol and its kinds;
* :mod:`~shiftbounds.conversations.models` — chat models from the Hub or a folder, tiny ones offline;
* :mod:`~shiftbounds.conversations.calibration` — calibrating a simulator with TRL's ``SFTTrainer``;
* :mod:`~shiftbounds.conversations.rollouts` — the paradigms on TRL's ``GRPOTrainer``.
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
