"""The base of the fake provider servers: a threaded HTTP server on 127.0.0.1 with a route table.

A fake provider (:mod:`moralkit.testing.fake_openai`, :mod:`moralkit.testing.fake_anthropic`) is a
*test double*: it answers like the provider's API (status codes, error bodies, headers, usage) with
answers that are a hash of the prompt, never data. Each subclass lists its endpoints in
:attr:`FakeHTTPServer.routes` as ``(method, path regex, handler name)``; adding an endpoint (e.g. the
batch APIs) is adding a row and a method. Every request is logged (:attr:`FakeHTTPServer.requests`),
and every usable answer sent (:attr:`FakeHTTPServer.usable`), so a test can check what a client sent
and that nothing it received was lost.

Transient faults common to the providers are drawn here, before a route runs, with probability
``fault_rate``: ``429`` (with ``Retry-After``), ``500``, ``503``, ``529`` (Anthropic's "overloaded"),
``timeout`` (the connection is held ``hang`` seconds, then closed) and ``drop`` (closed without a
response). The subclass gives each error its provider's body (:meth:`FakeHTTPServer.error_body`).
Loops are bounded: the server stops itself after ``max_seconds``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeHTTPServer", "Reply", "TRANSPORT_FAULTS", "stable_hash", "count_tokens"]

#: Faults any fake can draw (the subclass names the body of each HTTP error).
TRANSPORT_FAULTS = ("429", "500", "503", "529", "timeout", "drop")


def stable_hash(*parts) -> int:
    """A 64-bit hash of JSON-able parts, the same in every process."""
    return int.from_bytes(hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()[:8], "big")


def count_tokens(text: str) -> int:
    """The fakes' token count: one token per 4 characters, at least 1 for non-empty text."""
    return 0 if not text else max(1, (len(text) + 3) // 4)


@dataclass
class Reply:
    """What a route returns: a status, a JSON body and extra headers."""

    status: int
    body: object
    headers: dict = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _send(self, code, body: bytes, headers=None, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client was killed or gave up: that is the test
            self.close_connection = True

    def _serve(self, method):
        srv: FakeHTTPServer = self.server.owner
        n = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(n) if n else b""
        path = self.path.split("?", 1)[0]
        reply = srv._dispatch(method, path, {k.lower(): v for k, v in self.headers.items()}, raw)
        if reply is None:  # a "timeout" or "drop" fault: no response
            self.close_connection = True
            return
        self._send(reply.status, json.dumps(reply.body).encode(), reply.headers)

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_DELETE(self):
        self._serve("DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client killed mid-request is what the tests do
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Start and stop of a test double on 127.0.0.1 (one port, a serving thread, a self-stop timer).

    Subclasses build their HTTP server in :meth:`_make_httpd` and set ``max_seconds``; the server stops
    itself after that long, so a forgotten double never outlives its test.
    """

    _httpd = None
    max_seconds = 600.0

    def _make_httpd(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self):
        self._httpd = self._make_httpd()
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._timer = threading.Timer(self.max_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            httpd, self._httpd = self._httpd, None
            self._timer.cancel()
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class FakeHTTPServer(LoopbackServer):
    """Start with ``with Fake(...) as srv:`` (or :meth:`start` / :meth:`stop`); ``srv.url`` is the base URL.

    Parameters
    ----------
    api_key : str, optional
        The key the server expects (``None``: any key). A wrong key gets the provider's 401.
    fault_rate : float
        Probability that a request gets one of ``faults`` instead of its answer.
    faults : tuple of str
        Drawn from :data:`TRANSPORT_FAULTS`.
    seed : int
        Seeds the fault draws (request ``n`` gets the ``n``-th draw).
    retry_after : int
        ``Retry-After`` seconds sent with 429, 503 and 529.
    hang : float
        Seconds a ``timeout`` fault holds the connection.
    latency : callable, optional
        ``latency(path, body) -> seconds`` to sleep before answering.
    prompt_tokens : callable, optional
        ``prompt_tokens(messages) -> int``: the input tokens billed for a chat (``messages`` with the system
        message first, if any); default: the provider's convention over :func:`count_tokens`. A benchmark
        passes a real tokenizer here to compare ``moralkit estimate`` with what a server would bill.
    max_seconds : float
        The server shuts itself down after this long.
    """

    #: ``(method, path regex, handler method name)``; the handler gets ``(body, headers, match)``.
    routes: tuple = ()
    #: the path prefix of :attr:`url`
    prefix = "/v1"

    def __init__(self, api_key=None, fault_rate=0.0, faults=("429", "500"), seed=0, retry_after=1, hang=3.0,
                 latency=None, max_seconds=600.0, prompt_tokens=None):
        bad = [f for f in faults if f not in TRANSPORT_FAULTS]
        if bad or not 0 <= fault_rate <= 1:
            raise ValueError(f"unknown faults {bad} or fault_rate {fault_rate} outside [0, 1]; "
                             f"faults: {TRANSPORT_FAULTS}")
        self.api_key = api_key
        self.fault_rate, self.faults, self.seed = float(fault_rate), tuple(faults), int(seed)
        self.retry_after, self.hang, self.latency = int(retry_after), float(hang), latency
        self.max_seconds = float(max_seconds)
        self.prompt_tokens = prompt_tokens
        self.n = 0
        self.counts: dict = {}
        #: every request: ``{"method", "path", "headers", "body"}`` (the body as parsed JSON)
        self.requests: list = []
        #: every usable answer sent: ``(response id, text)``
        self.usable: list = []
        self._lock = threading.Lock()
        self._httpd = None
        self._routes = [(m, re.compile(p + r"$"), name) for m, p, name in self.routes]

    # ------------------------------------------------------------------ to override
    def error_body(self, status: int, kind: str, message: str) -> dict:  # pragma: no cover - abstract
        """The provider's JSON body of an HTTP error (``kind``: its error type)."""
        raise NotImplementedError

    def auth_ok(self, headers: dict) -> bool:  # pragma: no cover - abstract
        """Whether the request carries :attr:`api_key`."""
        raise NotImplementedError

    def common_headers(self) -> dict:
        """Headers of every response (request ids, rate-limit state)."""
        return {}

    # ------------------------------------------------------------------ machinery
    def next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids = getattr(self, "_ids", 0) + 1
            return f"{prefix}{stable_hash(self.seed, self._ids, prefix) % 16**24:024x}"

    def log_usable(self, rid: str, text: str) -> None:
        with self._lock:
            self.usable.append((rid, text))

    def _draw(self):
        with self._lock:
            self.n += 1
            rng = random.Random(stable_hash(self.seed, self.n))
            fault = rng.choice(self.faults) if self.faults and rng.random() < self.fault_rate else None
            self.counts[fault] = self.counts.get(fault, 0) + 1
        return fault

    def _fault_reply(self, fault):
        ra = {"retry-after": str(self.retry_after)}
        if fault == "429":
            return Reply(429, self.error_body(429, "rate_limit", "rate limited"), ra)
        if fault == "529":
            return Reply(529, self.error_body(529, "overloaded", "Overloaded"), ra)
        if fault == "503":
            return Reply(503, self.error_body(503, "unavailable", "service unavailable"), ra)
        return Reply(500, self.error_body(500, "server", "internal server error"))

    def _dispatch(self, method, path, headers, raw):
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(dict(method=method, path=path, headers=headers, body=body))
        for m, rx, name in self._routes:
            match = rx.match(path)
            if m == method and match:
                break
        else:
            return self._with_headers(Reply(404, self.error_body(404, "not_found", f"no route {method} {path}")))
        if body is None:
            return self._with_headers(Reply(400, self.error_body(400, "invalid_request", "the body is not JSON")))
        if not self.auth_ok(headers):
            return self._with_headers(Reply(401, self.error_body(401, "authentication", "invalid API key")))
        fault = self._draw()
        if self.latency:
            time.sleep(float(self.latency(path, body)))
        if fault in ("timeout", "drop"):
            if fault == "timeout":
                time.sleep(self.hang)
            return None
        if fault is not None:
            return self._with_headers(self._fault_reply(fault))
        return self._with_headers(getattr(self, name)(body, headers, match))

    def _with_headers(self, reply: Reply) -> Reply:
        reply.headers = {**self.common_headers(), **reply.headers}
        return reply

    def _make_httpd(self):
        httpd = _Server(("127.0.0.1", 0), _Handler)
        return httpd

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"


    def bodies(self, path_suffix: str = "") -> list:
        """The JSON bodies of the logged requests whose path ends with ``path_suffix``."""
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith(path_suffix)]
