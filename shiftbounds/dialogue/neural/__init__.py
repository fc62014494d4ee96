"""The neural (token) view of the dialogue tasks: :mod:`.tokens` (vocabulary and encoded logs),
:mod:`.rollout` (batched dialogues between a transformer agent and a user), :mod:`.training` (SFT,
realism discriminator, RL for every paradigm), :mod:`.measures` (estimators of ``J``, ``eps_t``,
``Delta_t``, ``delta_t``, ``D_t``, ``rho_t`` and user-model rates; independent of training) and
:mod:`.history` (the exact history tree the estimators are tested against)."""
