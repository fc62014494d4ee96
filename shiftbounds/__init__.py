"""shiftbounds: exact, tested distribution-shift bounds for multi-turn dialogue RL and noisy-expert imitation.

Layers (each imports only those below it; ``shiftbounds.llm`` and ``shiftbounds.conversations``
still import each other, which the move of ``llm`` into ``conversations`` is to end):

* ``shiftbounds.utils`` — results files, CLI, statistics, seeding, stage cache, worker processes;
  ``shiftbounds.tabular`` — the exact engine (finite-horizon MDPs, occupancies, values, DP);
  ``shiftbounds.losses`` — pure loss functions (divergences, policy gradient);
* ``shiftbounds.shift``, ``shiftbounds.constructions``, ``shiftbounds.imitation`` — per-turn shift
  measures, named instances, noisy-expert learners; ``shiftbounds.theory`` — the statements;
* ``shiftbounds.dialogue`` — hidden-goal dialogue tasks, exact and neural views, paradigms;
  ``shiftbounds.modadd`` — modular addition with a noisy teacher; ``shiftbounds.nn`` — a small
  transformer with a key-value cache;
* ``shiftbounds.conversations`` — your own logs on TRL (records, simulators, calibration, the
  paradigms, measures); ``shiftbounds.llm`` — Taskmaster and GSM8K loaders, sampling, noisy-teacher
  distillation; ``shiftbounds.figures`` — every figure, from saved results.

The statements and their proofs: ``docs/theory.md``; the experiments: ``docs/experiments.md``.
"""

__version__ = "0.2.0"
