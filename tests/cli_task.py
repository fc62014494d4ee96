"""A user's own task for the command-line tests, importable as ``tests.cli_task:judge`` and
``tests.cli_task:Probes``: the guess-the-number task's judge and a small probe builder."""

from __future__ import annotations

from shiftbounds.conversations.tasks import Probe, ProbeSet, hidden_goal_judge
from shiftbounds.dialogue.prepare import make_task, prepare_task

judge = hidden_goal_judge(prepare_task(make_task("guess_number", 3)).task)


class Probes:
    """Right probes: each history up to the first user reply to an agent message; the wrong ones
    have no logged reply (the logs hold none); disclosure: the history before the first user turn."""

    def build(self, convs, *, rng):
        right, disclosure = [], []
        for c in convs:
            msgs = [m.as_dict() for m in c.messages]
            j = next((i for i in range(1, len(msgs)) if msgs[i]["role"] == "user" and msgs[i - 1]["role"] == "assistant"), None)
            if j is not None:
                right.append(Probe(c.goal, tuple(msgs[:j]), msgs[j]["content"]))
            k = next((i for i, m in enumerate(msgs) if m["role"] == "user"), None)
            if k is not None:
                disclosure.append(Probe(c.goal, tuple(msgs[:k]), msgs[k]["content"]))
        return ProbeSet(tuple(right), tuple(Probe(p.goal, p.messages, "") for p in right), tuple(disclosure))

    def accepts(self, reply: str) -> bool:
        return reply.strip().startswith("yes")

    def kind(self, reply: str) -> str:
        r = reply.strip()
        return "accept" if r.startswith("yes") else "reject" if r.startswith("no") else "unclear"

    def discloses(self, reply: str, goal) -> bool:
        return str(goal) in reply

    def consistent(self, reply: str, goal) -> bool:
        return str(goal) in reply


def length_judge(goal, messages) -> float:
    """A reward with variance for any agent: the length of its messages (for training tests)."""
    return sum(len(m["content"]) for m in messages if m["role"] == "assistant") / 10.0
