"""Generation and training throughput of the transformers path, side by side.

``python -m benchmarks.llm [--preset smoke|default] [--model PATH] [--batch 8 --new 64 --repeats 3]``

* generation: the package's sampler (:func:`shiftbounds.distill.gsm8k.sample_completions`: batched,
  left-padded, key-value cached, stopping each row at its end-of-text) against a plain batched
  ``model.generate`` with a fixed number of new tokens, in new tokens per second;
* dialogue rollouts: the live path, :func:`shiftbounds.conversations.rollouts.rollout_dialogues`
  over ``--batch`` goals at once (agent and LM simulators on one model, one cached sampling call per
  turn) against the same dialogues one at a time (each dialogue draws from its own seed, so both
  roll out the same tokens), in dialogue tokens per second;
* multi-turn GRPO step: one step of TRL's ``GRPOTrainer`` with the package's multi-turn
  ``rollout_func`` (:mod:`shiftbounds.conversations.paradigms`: batched agent turns, an LM user on
  the same model, ``env_mask``) against the hand-written step it replaces
  (``benchmarks.reference``: ``roll_out_batch`` + ``dialogue_pg_loss`` + AdamW), both ``--batch`` dialogues of 3 agent turns of at most ``--new`` tokens on a model of
  the same size, in dialogue tokens (agent + user) per second over ``2 x --repeats`` steps after a
  warm-up step;
* training: one masked-span step (``benchmarks.reference.span_nll`` + AdamW) against a plain
  ``model(input_ids, labels=...)`` step, in tokens per second; on a GPU also model FLOPs
  utilisation against ``--peak-tflops`` (6 x parameters x tokens per step).

Without ``--model`` a tiny GPT-2 is built from a config (random weights), which only compares code
paths; on a lent GPU, pass a local 0.5-1.5B model folder.
"""

from __future__ import annotations

import copy
import tempfile
import time
from dataclasses import asdict, dataclass, field

import torch
from transformers import TrainerCallback

from benchmarks import best_time, write_report
from benchmarks.reference import TinyLM, dialogue_pg_loss, load_causal_lm, roll_out_batch, span_nll
from shiftbounds.conversations.classifiers import make_batch
from shiftbounds.conversations.models import build_tiny_chat_model, load_chat_model
from shiftbounds.conversations.paradigms import ParadigmConfig, paradigm_trainer
from shiftbounds.conversations.records import Conversation, Message
from shiftbounds.conversations.rollouts import rollout_dialogues
from shiftbounds.conversations.sampling import left_pad
from shiftbounds.conversations.simulators import LMUser
from shiftbounds.conversations.taskmaster import ROLE_TOKENS, OrderItem
from shiftbounds.distill.gsm8k import Problem, prompt_ids, sample_completions
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.seeding import derive_seed, numpy_rng, torch_generator, torch_init_seed


@dataclass(frozen=True)
class LLMBenchConfig:
    """Options of ``benchmarks.llm``."""

    model: str = field(default="", metadata={"help": "local model folder (empty: tiny GPT-2 from a config)"})
    batch: int = field(default=8, metadata={"help": "sequences"})
    new: int = field(default=64, metadata={"help": "new tokens per sequence"})
    repeats: int = field(default=3, metadata={"help": "repeats (best kept, after one warm-up)"})
    peak_tflops: float = field(default=989.0, metadata={"help": "device peak for MFU (H100/H200 dense bf16: 989)"})
    seed: int = field(default=0, metadata={"help": "seed of the models' initialisation and the sampling"})
    out_dir: str = field(default="results/benchmarks/llm/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        if min(self.batch, self.new, self.repeats) < 1 or self.peak_tflops <= 0:
            raise ValueError(f"--batch, --new, --repeats must be >= 1 and --peak-tflops > 0; got {self}")


PRESETS = {"default": {}, "smoke": {"batch": 2, "new": 4, "repeats": 1}}
PROBLEMS = [Problem(f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?", "", "") for i in range(64)]


def _grpo_step(a: LLMBenchConfig, agent, atok, goals) -> tuple[float, float]:
    """Tokens per second of one multi-turn GRPO step through TRL and through the hand-written path."""
    convs = [Conversation(f"c{i}", f"goal {i}", (Message("user", "a latte please"),)) for i in range(a.batch)]
    steps = 2 * a.repeats + 1  # the first step of each path warms up
    with tempfile.TemporaryDirectory() as tmp:
        with torch_init_seed(a.seed, "grpo_model"):
            folder = build_tiny_chat_model(tmp + "/m", ["a latte please", "hot or iced?"] * 50, vocab_size=512, d_model=128,
                                           n_layer=4, n_head=4, max_len=1024)
        model, tok = load_chat_model(folder)
        # prompts as short as the hand-written path's (there the user reads history + goal, the agent the history)
        user = LMUser(model, tok, persona="{goal}", max_new_tokens=a.new)
        cfg = ParadigmConfig(steps=steps, batch=a.batch, num_generations=2, lr=1e-5, max_turns=3, max_new_tokens=a.new,
                             system="", seed=a.seed)
        trainer = paradigm_trainer("interactive", folder, convs, lambda g, m: 0.0, cfg, tmp + "/out", user.clone)
        user.model = trainer.model  # the user speaks with the trained model, as in the hand-written path
        inner, tokens, times = trainer.rollout_func, [], []

        def counted(prompts, tr):
            out = inner(prompts, tr)
            tokens.append(sum(len(c) for c in out["completion_ids"]))
            return out

        class Clock(TrainerCallback):
            def on_step_begin(self, *args, **kw):
                self.t0 = time.perf_counter()

            def on_step_end(self, *args, **kw):
                times.append(time.perf_counter() - self.t0)

        trainer.rollout_func = counted
        trainer.add_callback(Clock())
        trainer.train()
    grpo = sum(tokens[1:]) / sum(times[1:])  # the first step warms up
    ref = copy.deepcopy(agent).eval()
    opt = torch.optim.AdamW(agent.parameters(), lr=1e-5)
    counts, seconds = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        dialogues = roll_out_batch(agent, atok, goals, agent, turns=3, max_new=a.new, temperature=1.0,
                                   generator=torch_generator(a.seed, "grpo", step), rng=numpy_rng(a.seed, "grpo", step))
        agent.train()
        loss = dialogue_pg_loss(agent, ref, dialogues, torch.rand(len(dialogues)), 2, 0.0, atok.pad_token_id)
        opt.zero_grad()
        loss.total.backward()
        opt.step()
        agent.eval()
        seconds.append(time.perf_counter() - t0)
        counts.append(sum(len(d.ids) - 1 for d in dialogues))
    return grpo, sum(counts[1:]) / sum(seconds[1:])


def main(argv: list[str] | None = None) -> dict:
    a = parse_config(LLMBenchConfig, __doc__, PRESETS, argv, name="benchmarks.llm")
    best = lambda fn, repeats: best_time(fn, repeats, warmup=True)  # noqa: E731
    tmp = tempfile.TemporaryDirectory()
    if a.model:
        folder = a.model
    else:
        with torch_init_seed(a.seed, "model"):
            folder = build_tiny_chat_model(tmp.name, [p.question for p in PROBLEMS], vocab_size=512, d_model=128, n_layer=4,
                                           n_head=4, max_len=1024, seed=a.seed)
    model, tok = load_chat_model(folder, device="cuda" if torch.cuda.is_available() else "cpu")
    dev = model.device
    probs = PROBLEMS[: a.batch]
    g = torch_generator(a.seed, "sampling")
    t_ours = best(lambda: sample_completions(model, tok, probs, a.new, temperature=1.0, generator=g), a.repeats)
    n_ours = sum(len(c) for c in sample_completions(model, tok, probs, a.new, temperature=1.0, generator=g))
    ids, att, _ = left_pad(prompt_ids(tok, probs), tok.pad_token_id, dev)
    t_hf = best(lambda: model.generate(ids, attention_mask=att, max_new_tokens=a.new, min_new_tokens=a.new, do_sample=True,
                                       pad_token_id=tok.pad_token_id), a.repeats)
    n_gen = a.batch * a.new
    with torch_init_seed(a.seed, "agent"):
        agent, atok, _ = load_causal_lm(a.model or None, TinyLM("gpt2", 128, 4, 4, 1024), special_tokens=ROLE_TOKENS)
    agent.eval()
    goals = [(OrderItem(["latte", "mocha", "cortado"][i % 3], 1 + i % 2),) for i in range(a.batch)]

    sims = [LMUser(model, tok, persona="{goal}", max_new_tokens=a.new) for _ in range(a.batch)]
    texts = [f"a {['latte', 'mocha', 'cortado'][i % 3]}, {1 + i % 2} please" for i in range(a.batch)]

    def dialogues(groups: list[list[int]]) -> int:
        """Roll out the dialogues of each group in one call; their tokens (prompt and completion)."""
        n = 0
        for idx in groups:
            out = rollout_dialogues(model, tok, [[] for _ in idx], [texts[i] for i in idx], [sims[i] for i in idx],
                                    lambda goal, messages: 0.0, max_turns=3, max_new_tokens=a.new, temperature=1.0,
                                    seeds=[derive_seed(a.seed, "rollouts", i) for i in idx], user_first=True)
            n += sum(len(d["prompt_ids"]) + len(d["completion_ids"]) for d in out)
        return n

    together, alone = [list(range(a.batch))], [[i] for i in range(a.batch)]
    n_roll, n_seq = dialogues(together), dialogues(alone)
    t_roll = best(lambda: dialogues(together), a.repeats)
    t_seq = best(lambda: dialogues(alone), a.repeats)
    batch = make_batch(tok, [(q.question, "x" * a.new) for q in probs], 1024).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def ours_step():
        loss = span_nll(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()

    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)

    def plain_step():
        loss = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()

    t_train, t_plain = best(ours_step, a.repeats), best(plain_step, a.repeats)
    grpo_tok_s, hand_tok_s = _grpo_step(a, agent, atok, goals)
    n_tok = int(batch.attention_mask.sum())
    n_params = sum(p.numel() for p in model.parameters())
    rows = [
        {"stage": "generation", "ours": "package sampler", "ours_tok_s": n_ours / t_ours,
         "reference": "transformers generate (batched)", "reference_tok_s": n_gen / t_hf, "ratio": (n_ours / t_ours) / (n_gen / t_hf)},
        {"stage": "rollouts", "ours": "rollout_dialogues, batched", "ours_tok_s": n_roll / t_roll,
         "reference": "one dialogue at a time", "reference_tok_s": n_seq / t_seq, "ratio": (n_roll / t_roll) / (n_seq / t_seq)},
        {"stage": "multi-turn GRPO step", "ours": "TRL GRPOTrainer + rollout_func", "ours_tok_s": grpo_tok_s,
         "reference": "hand-written rollouts + policy gradient", "reference_tok_s": hand_tok_s, "ratio": grpo_tok_s / hand_tok_s},
        {"stage": "training", "ours": "masked-span step", "ours_tok_s": n_tok / t_train,
         "reference": "plain labels step", "reference_tok_s": n_tok / t_plain, "ratio": t_plain / t_train},
    ]
    notes = (f"Device {dev}; {n_params / 1e6:.2f} M parameters; batch {a.batch}; {a.new} new tokens; rollouts: "
             f"{'the same' if n_roll == n_seq else 'DIFFERENT'} dialogue tokens batched and one at a time ({n_roll}).")
    if dev.type == "cuda":
        notes += f" Training MFU {6 * n_params * n_tok / t_train / (a.peak_tflops * 1e12):.1%} of {a.peak_tflops} TFLOP/s."
    tmp.cleanup()
    return write_report(a.out_dir, asdict(a), "benchmarks.llm: generation, rollouts and training, tokens per second", rows, notes)


if __name__ == "__main__":
    main()
