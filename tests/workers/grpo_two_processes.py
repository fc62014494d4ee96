"""Interactive RL through ``train_paradigm`` on a tiny agent, run by the equivalence test both as
a plain process and under ``accelerate launch --num_processes 2``: ``python ... BASE OUT``."""

from __future__ import annotations

import sys

import numpy as np

from shiftbounds.conversations import from_hidden_goal
from shiftbounds.conversations.paradigms import ParadigmConfig, train_paradigm
from shiftbounds.conversations.simulators import HiddenGoalUser
from shiftbounds.conversations.tasks import hidden_goal_judge
from shiftbounds.dialogue.prepare import make_task, prepare_task, sample_logs
from shiftbounds.dialogue.tasks import prompted_simulator


def main(base: str, out: str, per_device_batch: int) -> None:
    prep = prepare_task(make_task("guess_number", 3))
    convs = from_hidden_goal(prep.task, sample_logs(prep, 16, rng=np.random.default_rng(0)))

    def judge(goal, messages):  # hidden-goal reward plus a length term: variance within every group
        return hidden_goal_judge(prep.task)(goal, messages) + 0.1 * len(messages[0]["content"])

    cfg = ParadigmConfig(steps=2, batch=per_device_batch, num_generations=2, lr=1e-2, max_turns=2, max_new_tokens=6)
    train_paradigm("interactive", base, convs, judge, cfg, out, lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
