"""``shiftbounds serve``: a simulator behind an OpenAI-compatible endpoint, talked to with the
official ``openai`` client on loopback (a bounded number of requests; the server stops by itself)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import pytest

from shiftbounds.conversations.server import SimulatorServer
from shiftbounds.conversations.simulators import LMUser, respond_all
from shiftbounds.utils.seeding import derive_seed


@pytest.fixture(scope="module")
def served(synthetic):
    sim = LMUser.from_pretrained(synthetic[2], max_new_tokens=6)
    with SimulatorServer(sim, model_name="sim", port=0, max_requests=0) as server:
        yield sim, server, openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=60)


AGENT = "ask:>=2"
GOAL = "3"


def test_reply_is_the_simulators_own(served):
    """The endpoint's reply is the simulator's reply to the same dialogue with the same seed: the goal
    goes into the persona, the roles are flipped back, the seed and max_tokens are honoured."""
    sim, _, client = served
    out = client.chat.completions.create(model="sim", seed=11, temperature=1.0, max_tokens=5,
                                         messages=[{"role": "system", "content": GOAL}, {"role": "user", "content": AGENT}])
    user = sim.at_temperature(1.0)
    user.max_new_tokens = 5
    user.reset(GOAL, seed=derive_seed(11, "choice", 0))
    assert out.choices[0].message.content == respond_all([user], [[{"role": "assistant", "content": AGENT}]])[0][0]
    again = client.chat.completions.create(model="sim", seed=11, temperature=1.0, max_tokens=5,
                                           messages=[{"role": "system", "content": GOAL}, {"role": "user", "content": AGENT}])
    assert again.choices[0].message.content == out.choices[0].message.content
    assert client.models.list().data[0].id == "sim"
    assert out.choices[0].model_extra["shiftbounds"]["done"] in (True, False)


def test_n_stop_and_stream(served):
    _, _, client = served
    msgs = [{"role": "system", "content": GOAL}, {"role": "user", "content": AGENT}]
    many = client.chat.completions.create(model="sim", seed=2, n=3, messages=msgs)
    assert [c.index for c in many.choices] == [0, 1, 2]
    first = many.choices[0].message.content
    if first:
        cut = client.chat.completions.create(model="sim", seed=2, n=1, stop=[first[-1]], messages=msgs).choices[0].message.content
        assert cut == first[: first.index(first[-1])]
    stream = client.chat.completions.create(model="sim", seed=2, messages=msgs, stream=True)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == first


def test_bad_requests_get_a_4xx_naming_the_field(served):
    _, server, client = served
    with pytest.raises(openai.BadRequestError, match="messages\\[0\\] must be a system message"):
        client.chat.completions.create(model="sim", messages=[{"role": "user", "content": AGENT}])
    with pytest.raises(openai.BadRequestError, match="temperature must lie in"):
        client.chat.completions.create(model="sim", temperature=5, messages=[{"role": "system", "content": GOAL}])
    with pytest.raises(openai.BadRequestError, match="top_p is not supported"):
        client.chat.completions.create(model="sim", top_p=0.5, messages=[{"role": "system", "content": GOAL}])
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "system", "content": GOAL}])
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.url + "/chat/completions", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 400 and "not valid JSON" in json.loads(err.value.read())["error"]["message"]


def test_two_concurrent_clients_get_their_own_replies(served):
    """Requests from two threads at once (batched by the server) get the replies each gets alone."""
    _, server, client = served
    msgs = {k: [{"role": "system", "content": g}, {"role": "user", "content": AGENT}] for k, g in (("a", "1"), ("b", "3"))}
    alone = {k: client.chat.completions.create(model="sim", seed=5, messages=m).choices[0].message.content for k, m in msgs.items()}
    together, barrier = {}, threading.Barrier(2)

    def ask(key: str) -> None:
        other = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=60)
        barrier.wait()
        for _ in range(3):
            together.setdefault(key, []).append(other.chat.completions.create(model="sim", seed=5, messages=msgs[key]).choices[0].message.content)

    threads = [threading.Thread(target=ask, args=(k,)) for k in msgs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert together == {k: [v] * 3 for k, v in alone.items()}


@pytest.mark.slow
def test_console_serve_stops_after_its_requests(synthetic, tmp_path):
    """``shiftbounds serve --port 0 --max-requests 1`` prints its URL, answers the real client once
    and exits 0 by itself."""
    script = str(Path(sys.executable).parent / "shiftbounds")
    proc = subprocess.Popen([script, "serve", "--simulator", str(synthetic[2]), "--port", "0", "--max-requests", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
        out = client.chat.completions.create(model="shiftbounds-simulator", messages=[{"role": "system", "content": GOAL}])
        assert isinstance(out.choices[0].message.content, str)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            time.sleep(0.1)


def test_a_simulator_wrapping_an_lm_user_without_batching_warns(synthetic):
    """A user's own class that holds an LMUser but has no batched()/finish() is answered one
    dialogue at a time: respond_all says so instead of staying silent."""
    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

        def reset(self, goal, *, seed=None):
            self.inner.reset(goal, seed=seed)

        def respond(self, messages):
            return self.inner.respond(messages)

    sim = LMUser.from_pretrained(synthetic[2], max_new_tokens=2)
    users = [Wrapper(sim.clone()) for _ in range(2)]
    for u in users:
        u.reset(GOAL, seed=1)
    with pytest.warns(UserWarning, match="answered one at a time"):
        respond_all(users, [[{"role": "assistant", "content": AGENT}]] * 2)
