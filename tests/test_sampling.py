"""Batched sampling, text rollouts, sycophancy probes and the real-vs-simulated discriminator of
the transformers path: exact agreement of batched and one-at-a-time computation, and the metrics
against user models whose behaviour is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.reference import TinyLM, load_causal_lm, roll_out_batch
from shiftbounds.conversations.classifiers import RewardModel, classifier_scores, fit_classifier
from shiftbounds.conversations.rule_user import RuleUser, is_acceptance
from shiftbounds.conversations.sampling import left_pad, sample_batch
from shiftbounds.conversations.taskmaster import ROLE_TOKENS, OrderItem, load_tm4, order_success, parse_orders
from shiftbounds.conversations.tasks import names_whole_goal
from tests.marks import needs_data


def tiny(family: str, seed: int = 1):
    model, tok, _ = load_causal_lm(None, TinyLM(family, 32, 2, 4, 512), special_tokens=ROLE_TOKENS, device="cpu", seed=seed)
    return model.eval(), tok


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_left_padded_batch_computes_what_each_row_computes_alone(family):
    model, tok = tiny(family)
    prompts = [[tok.bos_token_id] + tok.encode(t) for t in ("hi", "a much longer prompt, with <user> markers", "mid size")]
    ids, att, pos = left_pad(prompts, tok.pad_token_id, "cpu")
    with torch.no_grad():
        batched = model(input_ids=ids, attention_mask=att, position_ids=pos).logits[:, -1]
        alone = torch.stack([model(input_ids=torch.tensor([p])).logits[0, -1] for p in prompts])
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-5)
    greedy = sample_batch(model, prompts, 30, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, temperature=0)
    assert greedy == [sample_batch(model, [p], 30, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, temperature=0)[0]
                      for p in prompts]


def test_sampler_stops_rows_cuts_contexts_and_is_seeded():
    model, tok = tiny("gpt2")
    prompts = [[tok.bos_token_id, 10, 11], [tok.bos_token_id, 12]]
    # a law with all its mass on token 7: every row emits 7 and stops there when 7 is a stop token
    only7 = lambda lg: torch.where(torch.arange(lg.shape[-1]) == 7, 0.0, -float("inf")).expand_as(lg)  # noqa: E731
    assert sample_batch(model, prompts, 5, stop_ids=[7], pad_id=tok.pad_token_id, log_probs=only7) == [[7], [7]]
    assert sample_batch(model, prompts, 5, stop_ids=[8], pad_id=tok.pad_token_id, log_probs=only7) == [[7] * 5] * 2
    draw = lambda s: sample_batch(model, prompts, 12, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,  # noqa: E731
                                  generator=torch.Generator().manual_seed(s))
    assert draw(3) == draw(3) and draw(3) != draw(4)
    long = [tok.bos_token_id] + tok.encode("x" * 600)  # longer than the model's 512 positions
    kept = sample_batch(model, [long], 4, stop_ids=[], pad_id=tok.pad_token_id, temperature=0, max_context=100)
    assert kept == sample_batch(model, [long[-100:]], 4, stop_ids=[], pad_id=tok.pad_token_id, temperature=0)
    with pytest.raises(ValueError, match="at least one token"):
        sample_batch(model, [[]], 4, stop_ids=[], pad_id=tok.pad_token_id)
    with pytest.raises(ValueError, match="max_new"):
        sample_batch(model, prompts, 0, stop_ids=[], pad_id=tok.pad_token_id)
    with pytest.raises(ValueError, match="temperature"):
        sample_batch(model, prompts, 3, stop_ids=[], pad_id=tok.pad_token_id, temperature=0.5, log_probs=only7)


def test_batched_rollouts_equal_one_at_a_time_rollouts():
    agent, tok = tiny("gpt2", seed=3)
    goals = [(OrderItem("latte"),), (OrderItem("mocha", 2, ("oat milk",)),), (OrderItem("cortado"), OrderItem("espresso"))]
    user = RuleUser(accept_wrong=0.0, leak=1.0)  # deterministic: always restates the goal, never accepts a wrong order
    kw = dict(turns=3, max_new=20, temperature=0.0, generator=torch.Generator(), max_context=400)
    batched = roll_out_batch(agent, tok, goals, user, rng=np.random.default_rng(0), **kw)
    alone = [roll_out_batch(agent, tok, [g], user, rng=np.random.default_rng(0), **kw)[0] for g in goals]
    assert [d.ids for d in batched] == [d.ids for d in alone]
    assert [d.agent_mask for d in batched] == [d.agent_mask for d in alone]
    for d, g in zip(batched, goals):
        assert len(d.ids) == len(d.agent_mask) and d.ids[0] == tok.bos_token_id
        text = tok.decode(d.ids)
        assert text.startswith("<user>I'd like ") and text.count("<user>") == 3  # no order was accepted
        agent_text = tok.decode([x for x, m in zip(d.ids, d.agent_mask) if m])
        assert "<user>" not in agent_text and d.success == (order_success(g, parse_orders(agent_text)) if parse_orders(agent_text) else 0.0)


def test_acceptance_and_rule_user_knobs():
    for text in ("Yes.", "yes it is", "Looks good to me!", "That's correct.", "Yep, that's perfect."):
        assert is_acceptance(text), text
    for text in ("No, I wanted a latte", "Actually, can I get it decaf?", "What syrups do you have?", "that isn't right", ""):
        assert not is_acceptance(text), text
    goal = (OrderItem("latte", 1, ("oat milk",)),)
    assert names_whole_goal("one latte with oat milk please", goal) and not names_whole_goal("one latte please", goal)
    rng = np.random.default_rng(0)
    wrong = '<api>add_order_item {"menu_item_id": "mocha-1", "quantity": "1"}'
    right = '<api>add_order_item {"menu_item_id": "latte-1", "quantity": "1", "attributes": [{"option": "Oat Milk"}]}'
    assert is_acceptance(RuleUser(0.0, 0.0).reply(goal, right, 1, rng=rng))
    assert not is_acceptance(RuleUser(0.0, 0.0).reply(goal, wrong, 1, rng=rng))
    assert is_acceptance(RuleUser(1.0, 0.0).reply(goal, wrong, 1, rng=rng))


@needs_data
def test_acceptance_rule_on_every_human_confirmation_reply():
    from shiftbounds.conversations import from_taskmaster4
    from shiftbounds.conversations.tasks import Taskmaster4Probes

    probes = Taskmaster4Probes().build(from_taskmaster4(load_tm4()), rng=np.random.default_rng(0))
    assert len(probes.right) == 2760
    assert np.mean([is_acceptance(p.human_reply) for p in probes.right]) == pytest.approx(0.914, abs=0.002)


def test_classifier_inputs_are_checked():
    make = lambda: RewardModel(tiny("gpt2", seed=7)[0])  # noqa: E731
    _, tok = tiny("gpt2", seed=5)
    with pytest.raises(ValueError, match="at least one training example"):
        fit_classifier(make(), tok, [], steps=1, batch=2, lr=1e-3, max_len=32, rng=np.random.default_rng(0), device="cpu")
    assert classifier_scores(make(), tok, [], batch=2, max_len=32, device="cpu").shape == (0,)
