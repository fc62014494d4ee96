"""Where the variance of Calibrated - Interactive RL comes from (issue 49, item 3): a nested design
of ``draws`` independent log draws, ``fits`` calibrated simulators fitted per draw (each its own
initialisation and minibatch order) and ``rl_seeds`` RL seeds per fit, on the main job's stages.

In draw ``i`` the SFT agent and the prompted simulator are shared; Interactive RL is trained once
per RL seed ``k`` and Calibrated Interactive RL once per (fit ``j``, RL seed ``k``), each run with
RL draws of its own (keyed by arm, fit and seed, as the main job keys them by arm). Each unit ``y_ijk = J_real(calibrated_ijk) - J_real(interactive_ik)``
is measured on the draw's common evaluation noise. :func:`variance_components` splits its variance
by the balanced nested ANOVA's method of moments (a negative estimate is reported as it is and its
share floored at 0), with percentile intervals from resampling the draws (the top level).
"""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, seed_setup
from shiftbounds.dialogue.neural.rollout import NeuralUser, draw_noise
from shiftbounds.dialogue.neural.training import SFTConfig, sft, train_agent
from shiftbounds.nn.transformer import load_model, save_model

LEVELS = ("log draw", "simulator fit", "RL seed")


def draw_units(cfg: PipelineConfig, task: str, draw: int, fits: int, rl_seeds: int) -> list[dict]:
    """Every unit of one log draw (``fits * rl_seeds`` of them), each stage saved under the draw's
    folder (``<out_dir>/<task>/seed<draw>/``) and loaded on a rerun. A picklable top-level function."""
    run = seed_setup(cfg, task, draw)
    vocab, train = run.vocab, run.train
    sft_cfg = SFTConfig(cfg.sft_steps)
    agent = run.model_stage("sft_agent", cfg.sft_steps, lambda pr: sft(vocab, run.build("agent"), train, "agent", sft_cfg, run.gen("sft_agent"), pr))
    noise = draw_noise(vocab.task, cfg.n_eval, run.gen("evaluation"))
    rl_cfg = cfg.rl

    def rl(name: str, user, *key) -> float:
        def make() -> float:
            trained = run.cache.torch(name, lambda: train_agent(vocab, agent, "interactive", rl_cfg, run.gen("rl", *key), user=user)[0],
                                      load=lambda path: load_model(path).to(run.device), save=save_model).eval()
            return M.evaluate_agent(vocab, trained, run.real, noise)["J_real"]
        return run.cache.json(f"J_{name}", make)

    units = []
    interactive = {k: rl(f"nested_interactive_r{k}", run.prompted, "interactive", k) for k in range(rl_seeds)}
    for j in range(fits):
        sim = run.model_stage(f"nested_sim_f{j}", cfg.sft_steps, lambda pr, j=j: sft(
            vocab, run.build(f"sim_f{j}"), train, "user", sft_cfg, run.gen("sim_sft", j), pr))
        for k in range(rl_seeds):
            calibrated = rl(f"nested_calibrated_f{j}_r{k}", NeuralUser(vocab, sim), "calibrated", j, k)
            units.append({"task": task, "draw": draw, "fit": j, "rl_seed": k, "calibrated": calibrated,
                          "interactive": interactive[k], "difference": calibrated - interactive[k]})
    return units


def nested_array(units: list[dict]) -> np.ndarray:
    """The differences as a balanced ``[draws, fits, rl_seeds]`` array (refused when unbalanced)."""
    keys = sorted({(u["draw"], u["fit"], u["rl_seed"]) for u in units})
    shape = tuple(len({k[i] for k in keys}) for i in range(3))
    if len(units) != len(keys) or len(keys) != int(np.prod(shape)):
        raise ValueError(f"a nested design needs every (draw, fit, rl_seed) once; got {len(units)} units for shape {shape}")
    y = np.empty(shape)
    index = [sorted({k[i] for k in keys}) for i in range(3)]
    for u in units:
        y[index[0].index(u["draw"]), index[1].index(u["fit"]), index[2].index(u["rl_seed"])] = u["difference"]
    return y


def moments(y: np.ndarray) -> np.ndarray:
    """Method-of-moments variance components of a balanced nested ``[a, b, n]`` array:
    ``(sigma2_draw, sigma2_fit, sigma2_rl)`` from the ANOVA mean squares
    ``MS_A = b n var(mean_i)``, ``MS_B = n sum (mean_ij - mean_i)^2 / (a (b - 1))``,
    ``MS_E = sum (y - mean_ij)^2 / (a b (n - 1))``: ``sigma2_rl = MS_E``,
    ``sigma2_fit = (MS_B - MS_E) / n``, ``sigma2_draw = (MS_A - MS_B) / (b n)``."""
    a, b, n = y.shape
    if min(a, b, n) < 2:
        raise ValueError(f"every level needs at least 2 replicates; got shape {y.shape}")
    m_ij = y.mean(2)
    m_i = m_ij.mean(1)
    ms_a = b * n * ((m_i - y.mean()) ** 2).sum() / (a - 1)
    ms_b = n * ((m_ij - m_i[:, None]) ** 2).sum() / (a * (b - 1))
    ms_e = ((y - m_ij[..., None]) ** 2).sum() / (a * b * (n - 1))
    return np.array([(ms_a - ms_b) / (b * n), (ms_b - ms_e) / n, ms_e])


def variance_components(y: np.ndarray, *, rng: np.random.Generator, n_boot: int = 2000) -> list[dict]:
    """Per level: the component, its share of the total (components floored at 0), and 95 %
    percentile intervals of both from resampling the draws with replacement."""
    est = moments(y)
    boot = np.array([moments(y[rng.integers(y.shape[0], size=y.shape[0])]) for _ in range(n_boot)])

    def shares(c: np.ndarray) -> np.ndarray:
        c = np.clip(c, 0.0, None)
        return c / c.sum(-1, keepdims=True).clip(min=1e-300)

    s, bs = shares(est), shares(boot)
    rows = []
    for i, level in enumerate(LEVELS):
        lo, hi = np.quantile(boot[:, i], [0.025, 0.975])
        slo, shi = np.quantile(bs[:, i], [0.025, 0.975])
        rows.append({"level": level, "replicates": int(y.shape[i]), "component": float(est[i]), "component_low": float(lo),
                     "component_high": float(hi), "sd": float(np.sqrt(max(est[i], 0.0))), "share": float(s[i]),
                     "share_low": float(slo), "share_high": float(shi)})
    return rows

