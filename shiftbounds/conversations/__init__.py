"""Conversations from any logs, user simulators over chat messages, and their TRL adapters
(docs/conversations.md).

* :mod:`~shiftbounds.conversations.records` — the JSONL / ``datasets.Dataset`` record format
  ``{"id", "goal", "messages": [{"role", "content"}]}``, validated at the boundary, with converters
  from Taskmaster-4, Taskmaster-3 and the synthetic hidden-goal tasks, and tool calls folded into
  the agent's turns;
* :mod:`~shiftbounds.conversations.simulators` — the ``UserSimulator`` protocol and its kinds
  (prompted / calibrated LM, explicit, rule-based, rule-corrected), batched replies;
* :mod:`~shiftbounds.conversations.models` — chat models from the Hub or a folder, tiny ones offline,
  saved with their metadata;
* :mod:`~shiftbounds.conversations.calibration` — the SFT stages on TRL's ``SFTTrainer``: calibrating
  a simulator, the SFT agent, pretraining a base model;
* :mod:`~shiftbounds.conversations.rollouts` — multi-turn rollouts for TRL's ``GRPOTrainer``;
* :mod:`~shiftbounds.conversations.paradigms` — the three paradigms with one ``GRPOConfig``, agents
  saved, paired evaluation;
* :mod:`~shiftbounds.conversations.measures` — NLL by turn, discriminator AUC by turn, sycophancy;
* :mod:`~shiftbounds.conversations.tasks` — what a task supplies: judges and probe builders
  (synthetic tasks, Taskmaster-4).
"""

from shiftbounds.conversations.records import (
    EXTRA_KEYS,
    ROLES,
    Conversation,
    ConversationData,
    ConversationFormatError,
    Message,
    as_conversations,
    from_dataset,
    from_hidden_goal,
    from_taskmaster3,
    from_taskmaster4,
    irregularities,
    read_conversations,
    to_dataset,
    write_conversations,
)

__all__ = [
    "EXTRA_KEYS",
    "ROLES",
    "Conversation",
    "ConversationData",
    "ConversationFormatError",
    "Message",
    "as_conversations",
    "from_dataset",
    "from_hidden_goal",
    "from_taskmaster3",
    "from_taskmaster4",
    "irregularities",
    "read_conversations",
    "to_dataset",
    "write_conversations",
]
