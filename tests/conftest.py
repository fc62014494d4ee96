"""Fixtures shared by the conversation-path tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """``(prepared task, conversations, model folder)``: the guess-the-number task with a memory user,
    120 of its logged dialogues as text conversations, and a tiny chat model whose tokenizer was
    trained on their text and the prompts the tests use."""
    from shiftbounds.conversations import from_hidden_goal
    from shiftbounds.conversations.models import build_tiny_chat_model
    from shiftbounds.conversations.paradigms import SYSTEM
    from shiftbounds.conversations.simulators import PERSONA
    from shiftbounds.dialogue.prepare import make_task, prepare_task, sample_logs

    prep = prepare_task(make_task("guess_number", 3))
    convs = from_hidden_goal(prep.task, sample_logs(prep, 120, rng=np.random.default_rng(0)))
    texts = [m.content for c in convs for m in c.messages] + [PERSONA, SYSTEM, "You are the agent."]
    base = build_tiny_chat_model(tmp_path_factory.mktemp("base"), texts, vocab_size=300, d_model=32, n_layer=1)
    return prep, convs, base
