"""Hidden-goal dialogue tasks in two views (docs/pipeline.md): the exact tabular view (summary MDPs,
paradigms solved exactly) and the token view (transformer agents and simulators, rollouts,
training stages, measurements)."""
