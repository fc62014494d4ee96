"""Every figure of the package, drawn from plain saved results (the dicts the experiments write to
``results.json``), never from experiment configs: the experiments, ``python -m paper_figures`` and
the notebooks all draw through these functions. Each takes a results dict and a file stem and
returns the PNG and PDF paths it wrote. The text path's figures live in
:mod:`shiftbounds.figures.text` (imported on its own: it needs the transformers stack).
"""

from shiftbounds.figures.bounds import plot_bound_check
from shiftbounds.figures.dialogue import (
    plot_compounding_sweep,
    plot_gap_split,
    plot_learner_gaps,
    plot_log_size,
    plot_pipeline_curves,
    plot_pipeline_shifts,
    plot_pipeline_user_models,
    plot_regime_map,
    plot_regime_per_turn,
    plot_regime_user_models,
    plot_variance_components,
)
from shiftbounds.figures.imitation import plot_modadd, plot_modadd_curves, plot_noisy_expert

__all__ = [
    "plot_compounding_sweep",
    "plot_gap_split",
    "plot_learner_gaps",
    "plot_log_size",
    "plot_bound_check",
    "plot_modadd",
    "plot_modadd_curves",
    "plot_noisy_expert",
    "plot_pipeline_curves",
    "plot_pipeline_shifts",
    "plot_pipeline_user_models",
    "plot_variance_components",
    "plot_regime_map",
    "plot_regime_per_turn",
    "plot_regime_user_models",
]
