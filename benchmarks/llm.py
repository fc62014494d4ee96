"""Generation and training throughput of the transformers path, side by side.

``python -m benchmarks.llm [--model PATH] [--batch 8 --new 64 --repeats 3]``

* generation: the package's sampler (:func:`shiftbounds.llm.gsm8k.sample_completions`: batched
  ``generate`` with left padding, stopping each row at its end-of-text) against a plain batched
  ``model.generate`` with a fixed number of new tokens, in new tokens per second;
* dialogue rollouts: :func:`shiftbounds.llm.dialogue.roll_out_batch` over ``--batch`` goals at once
  (agent and LM user, one cached sampling call per turn) against the same rollouts one dialogue at
  a time, in agent + user tokens per second;
* training: one masked-span step (:func:`shiftbounds.llm.training.span_nll` + AdamW) against a plain
  ``model(input_ids, labels=...)`` step, in tokens per second; on a GPU also model FLOPs
  utilisation against ``--peak-tflops`` (6 x parameters x tokens per step).

Without ``--model`` a tiny GPT-2 is built from a config (random weights), which only compares code
paths; on a lent GPU, pass a local 0.5-1.5B model folder.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from shiftbounds.llm.dialogue import roll_out_batch
from shiftbounds.llm.gsm8k import SPECIALS, Problem, sample_completions
from shiftbounds.llm.models import TinyLM, load_causal_lm
from shiftbounds.llm.taskmaster import ROLE_TOKENS, OrderItem
from shiftbounds.llm.training import make_batch, span_nll


def best(fn, repeats: int) -> float:
    """Best wall time of ``repeats`` calls after one warm-up call."""
    fn()
    out = float("inf")
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="local model folder (default: tiny GPT-2 from a config)")
    p.add_argument("--batch", type=int, default=8, help="sequences")
    p.add_argument("--new", type=int, default=64, help="new tokens per sequence")
    p.add_argument("--repeats", type=int, default=3, help="repeats (best kept)")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="device peak for MFU (H100/H200 dense bf16: 989)")
    a = p.parse_args(argv)
    model, tok, dev = load_causal_lm(a.model, TinyLM("gpt2", 128, 4, 4, 1024), special_tokens=SPECIALS)
    model.eval()
    probs = [Problem(f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?", "", "") for i in range(a.batch)]
    g = torch.Generator().manual_seed(0)
    t_ours = best(lambda: sample_completions(model, tok, probs, a.new, temperature=1.0, generator=g), a.repeats)
    n_ours = sum(len(c) for c in sample_completions(model, tok, probs, a.new, temperature=1.0, generator=g))
    enc = [torch.tensor([tok.bos_token_id] + list(tok.encode(f"<q>{q.question}<a>"))) for q in probs]
    T = max(len(e) for e in enc)
    ids = torch.full((a.batch, T), tok.pad_token_id)
    att = torch.zeros_like(ids)
    for i, e in enumerate(enc):  # left padding for batched generation
        ids[i, T - len(e):] = e
        att[i, T - len(e):] = 1
    ids, att = ids.to(dev), att.to(dev)
    t_hf = best(lambda: model.generate(ids, attention_mask=att, max_new_tokens=a.new, min_new_tokens=a.new, do_sample=True,
                                       pad_token_id=tok.pad_token_id), a.repeats)
    n_gen = a.batch * a.new
    agent, atok, _ = load_causal_lm(a.model, TinyLM("gpt2", 128, 4, 4, 1024), special_tokens=ROLE_TOKENS)
    agent.eval()
    goals = [(OrderItem(["latte", "mocha", "cortado"][i % 3], 1 + i % 2),) for i in range(a.batch)]

    def dialogues(groups):
        out = []
        for gs in groups:
            out += roll_out_batch(agent, atok, gs, agent, turns=3, max_new=a.new, temperature=1.0,
                                  generator=torch.Generator().manual_seed(0), rng=np.random.default_rng(0))
        return out

    n_roll = sum(len(d.ids) - 1 for d in dialogues([goals]))
    t_roll = best(lambda: dialogues([goals]), a.repeats)
    n_seq = sum(len(d.ids) - 1 for d in dialogues([[g] for g in goals]))
    t_seq = best(lambda: dialogues([[g] for g in goals]), a.repeats)
    batch = make_batch(tok, [(f"<q>{q.question}<a>", "x" * a.new) for q in probs], 1024).to(dev)
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
    n_tok = int(batch.attention_mask.sum())
    n_params = sum(p.numel() for p in model.parameters())
    print(f"device {dev}; {n_params / 1e6:.2f} M parameters; batch {a.batch}; {a.new} new tokens\n")
    print(f"generation  package sampler:        {n_ours / t_ours:10.0f} tok/s   transformers generate (batched): {n_gen / t_hf:10.0f} tok/s"
          f"   ratio {(n_ours / t_ours) / (n_gen / t_hf):.2f}x")
    print(f"rollouts    batched dialogues:      {n_roll / t_roll:10.0f} tok/s   one dialogue at a time:          {n_seq / t_seq:10.0f} tok/s"
          f"   ratio {(n_roll / t_roll) / (n_seq / t_seq):.2f}x")
    print(f"training    masked-span step:       {n_tok / t_train:10.0f} tok/s   plain labels step:               {n_tok / t_plain:10.0f} tok/s"
          f"   ratio {t_plain / t_train:.2f}x")
    if dev.type == "cuda":
        mfu = 6 * n_params * n_tok / t_train / (a.peak_tflops * 1e12)
        print(f"training MFU {mfu:.1%} of {a.peak_tflops} TFLOP/s")
    return {"gen_ours": n_ours / t_ours, "gen_hf": n_gen / t_hf, "roll_batched": n_roll / t_roll, "roll_seq": n_seq / t_seq, "train_ours": n_tok / t_train, "train_plain": n_tok / t_plain}


if __name__ == "__main__":
    main()
