"""Static vs Interactive vs Calibrated Interactive RL on tabular dialogue tasks, exactly.

``python -m experiments.dialogue_regimes [--preset smoke|default] [options]``

For each task (``guess_number``: information seeking; ``booking``: slot filling) it builds the
exact summary MDP against the real user, samples ``n`` logs of ``pi_data``, and solves every
paradigm exactly (``shiftbounds.dialogue.exact.paradigms``). It reports

* the main table at ``--horizon``, ``--n-main`` and the default simulator knobs: ``J_real``
  (goal-aware judged return against the real user), success rate, training objective and its
  gap to ``J_real``, shift summaries, with 95 % CIs over ``--seeds`` log samples;
* per-turn ``eps_t, Delta_t, B(eps)_t`` and ``delta_t, D_t, rho_t, B(delta)_t`` and the simulator
  error on logged contexts (``per_turn.csv``);
* a regime map over the real user (memoryless, or with memory: consistent, impatient with repeated
  questions, clarifying more as the dialogue grows; the memory user at ``H <= 4``, where its exact
  summary space stays small), the prompted simulator's sycophancy (accept-wrong) and leak rates,
  the log size ``n`` and the horizon ``H``: which paradigm wins on ``J_real`` and by how much, a win
  counted only where the paired 95 % CI over log samples excludes 0 (``regimes.csv``,
  ``regime_map.png``);
* the user models' sycophancy metrics (``sycophancy.png``).

Every shift is checked against its bound as it is computed (``Delta <= B(eps)``, ``D <= B(delta)``).
Finished (task, H) blocks are saved under ``blocks/`` and skipped on a rerun with the same options.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from shiftbounds.dialogue.exact.regimes import (
    RegimeConfig,
    block_name,
    blocks_todo,
    main_table,
    per_turn_rows,
    regime_cells,
    report_md,
    run_block,
)
from shiftbounds.figures import plot_regime_map, plot_regime_per_turn, plot_regime_user_models
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.stages import StageCache

PRESETS = {
    "default": {},
    "smoke": {"horizon": 3, "horizons": (3,), "n_main": 30, "n_logs": (30,), "accept_wrong_grid": (0.0, 0.6),
              "leak_grid": (0.0, 0.4), "seeds": 2},
}


def run(cfg: RegimeConfig, stream: TextIO | None = None) -> dict:
    """Run (resuming finished blocks), write every output, return the results dict."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    todo = blocks_todo(cfg)
    steps_per_block = lambda H: cfg.seeds * len(set(cfg.n_logs) | ({cfg.n_main} if H == cfg.horizon else set())) \
        + len({(a, l) for a in cfg.accept_wrong_grid for l in cfg.leak_grid} | {(cfg.accept_wrong, cfg.leak)})
    prog = Progress(sum(steps_per_block(H) for _, H, _ in todo), "dialogue_regimes", stream=stream)
    blocks, cache = {}, StageCache(out / "blocks")
    for task, H, user in todo:
        name = block_name(cfg, task, H, user)
        blocks[(task, H, user)] = cache.json(name, lambda: run_block(cfg, task, H, user, prog))
        if name not in cache.seconds:
            prog.update(steps_per_block(H), note=f"{task} H={H} {user} (resumed)")
    main, rows = main_table(cfg, blocks)
    cells = regime_cells(cfg, blocks)
    per_turn = per_turn_rows(cfg, main)
    results = {"config": asdict(cfg), "main": main, "main_rows": rows, "regimes": cells,
               "n_states": {f"{t}_H{H}_{u}": b["n_states"] for (t, H, u), b in blocks.items()}}
    write_json(out / "results.json", results)
    write_csv(out / "main.csv", rows)
    write_csv(out / "per_turn.csv", per_turn)
    write_csv(out / "regimes.csv", cells)
    md = report_md(cfg, rows, cells)
    atomic_write_text(out / "results.md", md)
    plot_regime_per_turn(results, out / "per_turn_shifts")
    plot_regime_map(results, out / "regime_map")
    plot_regime_user_models(results, out / "user_models")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(RegimeConfig, __doc__, PRESETS, argv, name="experiments.dialogue_regimes")
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "results.md").read_text())
    print(f"wrote {cfg.out_dir}/results.md, main.csv, per_turn.csv, regimes.csv, results.json and figures")
    return results


if __name__ == "__main__":
    main()
