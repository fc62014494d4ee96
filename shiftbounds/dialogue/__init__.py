"""Hidden-goal dialogue tasks: a shared core and two views of it (docs/pipeline.md).

Core (this folder): :mod:`~shiftbounds.dialogue.tasks` (tasks, user models, the judge),
:mod:`~shiftbounds.dialogue.summary` (the summary space and exact user MDPs),
:mod:`~shiftbounds.dialogue.logs` (logged dialogues, JSONL), :mod:`~shiftbounds.dialogue.prepare`
(a task by name, its real user, ``pi_data`` and its logs).

Views, which never import each other:

* :mod:`shiftbounds.dialogue.exact` — the tabular view: paradigms solved exactly on the summary
  MDPs (agents, calibrated simulators, paradigms, one study cell);
* :mod:`shiftbounds.dialogue.neural` — the token view: transformer agents and simulators
  (tokens, rollouts, training stages, measurements, the exact history tree they are tested on).
"""
