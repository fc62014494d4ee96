"""shiftbounds: exact, tested distribution-shift bounds for multi-turn dialogue RL and noisy-expert imitation.

Layers, lowest first; a module imports only from layers below its own (``tests/test_lint.py``
checks it, so the import graph has no cycle and no arrow running back up):

1. ``shiftbounds.utils`` — results files, CLI, statistics, seeding, stage cache, worker processes,
   the device, memory estimates;
2. ``shiftbounds.tabular`` — the exact engine (finite-horizon MDPs, occupancies, values, DP);
   ``shiftbounds.losses`` — pure loss functions (divergences, policy gradient);
   ``shiftbounds.nn`` — a small transformer with a key-value cache;
3. ``shiftbounds.theory`` — the statements; ``shiftbounds.constructions`` — named instances;
4. ``shiftbounds.shift`` — per-turn shift measures; ``shiftbounds.imitation`` — noisy-expert
   learners; ``shiftbounds.crossover`` — the crossover horizon; ``shiftbounds.modadd`` — modular
   addition with a noisy teacher;
5. ``shiftbounds.dialogue`` — hidden-goal dialogue tasks, exact and neural views, paradigms;
   ``shiftbounds.bound_sweep`` — the bound check's instance families (exact gaps beside the bounds);
   ``shiftbounds.noisy_expert`` — the noisy-expert study's chains and their analysis;
   ``shiftbounds.modadd_study`` — the modular-addition study's seeds, tables and report;
6. ``shiftbounds.conversations`` — the one text path, on TRL: your own logs and Taskmaster-4/3
   (records, loaders, sampling, simulators, calibration, the paradigms, measures, classifiers);
7. ``shiftbounds.distill`` — noisy-teacher distillation of language models (GSM8K) on TRL;
   ``shiftbounds.figures`` — every figure, from saved results; ``shiftbounds.ledger`` — the claims
   ledger's rules, its per-seed readers and the recomputation of the shipped tables;
8. ``shiftbounds.cli`` — the ``shiftbounds`` command (calibrate, measure, train, evaluate on your logs);
   ``shiftbounds.main_job`` — the main job's run, its tables and figures (``experiments.full_pipeline``);
   ``shiftbounds.taskmaster_job`` — the Taskmaster-4 study's run, its tables and figures
   (``experiments.real_dialogue``).

The statements and their proofs: ``docs/theory.md``; the experiments: ``docs/experiments.md``.
"""

__version__ = "0.3.0"
