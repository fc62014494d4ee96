"""A user simulator behind an OpenAI-compatible endpoint (``shiftbounds serve``).

Benchmarks and trainers that take their user as a chat model (tau2-bench's ``user_llm``, the
verifiers library's user agent, ART, prime-rl) can talk to a calibrated simulator instead of a
prompted model. :class:`SimulatorServer` answers

* ``GET /v1/models`` — the one model it serves (its name, kind, persona and view);
* ``POST /v1/chat/completions`` — the simulated user's next message.

A request reads like one to a user-simulator LLM: ``messages[0]`` is a ``system`` message whose
content is the **goal** (text, or a JSON object), which the server puts into the simulator's own
persona exactly as in training (``persona.format(goal=...)``); the rest is the dialogue as the
simulated user sees it: the agent's turns as ``user``, the simulator's own earlier turns as
``assistant``. Honoured: ``temperature`` (0: greedy), ``max_tokens`` / ``max_completion_tokens``,
``seed`` (the same seed and request give the same reply), ``n``, ``stop`` and ``stream`` (the reply
as one chunk, then ``[DONE]``). ``top_p`` other than 1, an unknown model, malformed JSON or
messages are answered with a 4xx and an OpenAI-style error body naming the field. Each choice
carries ``shiftbounds.done``: whether the simulator ends the dialogue there.

Concurrent requests are queued to one worker thread that answers everything waiting in one batch
(:func:`~shiftbounds.conversations.simulators.respond_all`); every reply draws only from its own
seed, so batching does not change it. The server uses the standard library's ``http.server`` (no
web framework to install); it binds to loopback by default.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shiftbounds.conversations.simulators import LMUser, respond_all
from shiftbounds.utils.seeding import derive_seed


class RequestError(ValueError):
    """A malformed request: answered with ``status`` and an OpenAI-style error naming ``param``."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


def _goal(content: str) -> Any:
    """The goal a system message carries: a JSON object or list as that value, else the text."""
    text = content.strip()
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return content
    return content


def _number(body: dict, name: str, default: float, low: float, high: float, integer: bool = False) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise RequestError(f"{name} must be {'an integer' if integer else 'a number'}; got {value!r}", name)
    if not low <= value <= high:
        raise RequestError(f"{name} must lie in [{low}, {high}]; got {value}", name)
    return value


def parse_request(body: Any, model_name: str, max_new_tokens: int) -> dict:
    """The validated fields of a chat-completions request body: ``goal``, ``messages`` (the dialogue
    in the package's orientation: the agent as ``assistant``), ``temperature``, ``max_new_tokens``,
    ``seed`` (``None``: the server's next), ``n``, ``stop`` and ``stream``.

    Raises:
        RequestError: naming the field that is missing or malformed.
    """
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object; got {type(body).__name__}")
    if body.get("model") not in (None, model_name):
        raise RequestError(f"model {body.get('model')!r} is not served here; this server serves {model_name!r}", "model", 404,
                           "model_not_found")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise RequestError("messages must be a non-empty list", "messages")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") or not isinstance(m.get("content"), str):
            raise RequestError(f"messages[{i}] must be {{'role': 'system' | 'user' | 'assistant', 'content': str}}; got {m!r}",
                               f"messages[{i}]")
    if msgs[0]["role"] != "system" or not msgs[0]["content"].strip():
        raise RequestError("messages[0] must be a system message whose content is the simulated user's goal", "messages[0]")
    if any(m["role"] == "system" for m in msgs[1:]):
        raise RequestError("only messages[0] may be a system message (the goal)", "messages")
    if _number(body, "top_p", 1.0, 0.0, 1.0) != 1.0:
        raise RequestError("top_p is not supported (the simulator samples from its whole distribution); send 1 or omit it", "top_p")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError(f"stop must be a string or a list of strings; got {body.get('stop')!r}", "stop")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RequestError(f"seed must be an integer; got {seed!r}", "seed")
    flip = {"user": "assistant", "assistant": "user"}
    return {"goal": _goal(msgs[0]["content"]), "messages": [{"role": flip[m["role"]], "content": m["content"]} for m in msgs[1:]],
            "temperature": float(_number(body, "temperature", 1.0, 0.0, 2.0)),
            "max_new_tokens": int(_number({"m": limit}, "m", max_new_tokens, 1, 4096, integer=True)) if limit is not None else max_new_tokens,
            "seed": seed, "n": int(_number(body, "n", 1, 1, 16, integer=True)), "stop": stop, "stream": bool(body.get("stream", False))}


def _cut(reply: str, stop: list[str]) -> tuple[str, bool]:
    """``reply`` up to its first stop string, and whether one was found."""
    cuts = [reply.index(s) for s in stop if s in reply]
    return (reply[: min(cuts)], True) if cuts else (reply, False)


class SimulatorServer:
    """Serve ``simulator`` (an :class:`~shiftbounds.conversations.simulators.LMUser`) as ``model_name``
    on ``host:port`` (port 0: a free one; :attr:`port` tells which). ``seed``: the root of the seeds
    of requests that name none; ``max_requests``: stop after answering that many chat requests
    (0: never; for tests and scripted runs). Use as a context manager, or :meth:`start` /
    :meth:`serve_forever` and :meth:`stop`."""

    def __init__(self, simulator: LMUser, *, model_name: str = "shiftbounds-simulator", host: str = "127.0.0.1",
                 port: int = 8000, seed: int = 0, max_requests: int = 0, log: Callable[[str], None] | None = None) -> None:
        if not isinstance(simulator, LMUser):
            raise ValueError(f"the server serves an LMUser (a simulator folder); got {type(simulator).__name__}")
        if max_requests < 0:
            raise ValueError(f"max_requests must be >= 0 (0: never stop); got {max_requests}")
        self.simulator, self.model_name, self.seed, self.max_requests = simulator, model_name, seed, max_requests
        self.log = log or (lambda line: None)
        self.answered, self._counter, self._jobs = 0, itertools.count(), queue.Queue()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (``.../v1``)."""
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    def start(self) -> SimulatorServer:
        """Serve in background threads; returns at once."""
        for target in (self._batch_loop, self._httpd.serve_forever):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` (or ``max_requests`` answered, or Ctrl-C)."""
        self.start()
        try:
            while self._threads[1].is_alive():
                self._threads[1].join(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        self._jobs.put(None)
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def models(self) -> dict:
        sim = self.simulator
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "created": 0, "owned_by": "shiftbounds",
                                            "kind": sim.name, "persona": sim.persona, "view": sim.view}]}

    def complete(self, body: Any) -> dict:
        """The chat-completions response to ``body`` (through the batching queue)."""
        req = parse_request(body, self.model_name, self.simulator.max_new_tokens)
        root = req["seed"] if req["seed"] is not None else derive_seed(self.seed, "request", next(self._counter))
        users, futures = [], []
        for k in range(req["n"]):
            user = self.simulator.at_temperature(req["temperature"])
            user.max_new_tokens = req["max_new_tokens"]
            user.reset(req["goal"], seed=derive_seed(root, "choice", k))
            fut: Future = Future()
            self._jobs.put((user, req["messages"], fut))
            users.append(user)
            futures.append(fut)
        choices = []
        for k, fut in enumerate(futures):
            reply, done = fut.result()
            reply, stopped = _cut(reply, req["stop"])
            choices.append({"index": k, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop",
                            "logprobs": None, "shiftbounds": {"done": bool(done), "stop_string": stopped}})
        self.answered += 1
        self.log(f"answered request {self.answered} ({req['n']} choice(s), {len(req['messages'])} dialogue messages)")
        if self.max_requests and self.answered >= self.max_requests:
            threading.Thread(target=self._httpd.shutdown, daemon=True).start()
        return {"id": f"chatcmpl-{root}", "object": "chat.completion", "created": int(time.time()), "model": self.model_name,
                "choices": choices, "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                "stream": req["stream"]}

    def _batch_loop(self) -> None:
        """Answer every queued reply in one :func:`respond_all` batch, until a ``None`` arrives."""
        while True:
            jobs = [self._jobs.get()]
            while True:
                try:
                    jobs.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            live = [j for j in jobs if j is not None]
            if live:
                try:
                    answers = respond_all([u for u, _, _ in live], [m for _, m, _ in live])
                    for (_, _, fut), ans in zip(live, answers):
                        fut.set_result(ans)
                except Exception as exc:  # noqa: BLE001 - handed to every waiting request
                    for _, _, fut in live:
                        fut.set_exception(exc)
            if len(live) < len(jobs):
                return


def _stream_chunks(response: dict) -> list[dict]:
    """A completed response as OpenAI stream chunks: per choice its role and content, then its end."""
    base = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    out = []
    for c in response["choices"]:
        out.append(base | {"choices": [{"index": c["index"], "delta": {"role": "assistant", "content": c["message"]["content"]},
                                        "finish_reason": None}]})
        out.append(base | {"choices": [{"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"],
                                        "shiftbounds": c["shiftbounds"]}]})
    return out


def _handler(server: SimulatorServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
            server.log(format % args)

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
            kind = "invalid_request_error" if status < 500 else "server_error"
            self._send(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, server.models())
            else:
                self._error(404, f"no such path {self.path!r}; this server answers /v1/models and /v1/chat/completions")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no such path {self.path!r}; POST to /v1/chat/completions")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
            except (ValueError, json.JSONDecodeError) as exc:
                self._error(400, f"the request body is not valid JSON ({exc})")
                return
            try:
                response = server.complete(body)
            except RequestError as exc:
                self._error(exc.status, str(exc), exc.param, exc.code)
                return
            except Exception as exc:  # noqa: BLE001 - reported to the client, not lost in a thread
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                return
            if not response.pop("stream"):
                self._send(200, response)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _stream_chunks(response):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return Handler
