"""shiftbounds: exact, tested distribution-shift bounds for multi-turn dialogue RL and noisy-expert imitation.

Layers (each imports only those below it):

* ``shiftbounds.tabular`` — the exact engine (finite-horizon MDPs, occupancies, values, DP);
  ``shiftbounds.losses`` — pure loss functions (divergences, policy gradient);
* ``shiftbounds.shift``, ``shiftbounds.constructions``, ``shiftbounds.imitation`` — per-turn shift
  measures, named instances, noisy-expert learners; ``shiftbounds.theory`` — the statements;
* ``shiftbounds.dialogue`` — hidden-goal dialogue tasks, exact and neural views, paradigms;
  ``shiftbounds.modadd`` — modular addition with a noisy teacher; ``shiftbounds.nn`` — a small
  transformer with a key-value cache;
* ``shiftbounds.llm`` — the transformers path (Taskmaster, GSM8K, several processes).

The statements and their proofs: ``docs/theory.md``; the experiments: ``docs/experiments.md``.
"""

__version__ = "0.1.0"
