"""A small OpenAI-compatible chat-completions server for a local model, hardened against abuse.

``python -m moralkit serve --model qwen2.5-coder-0.5b-instruct --port 8000``
serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 with a
:class:`~moralkit.collect.backends.TransformersBackend`, so that any
OpenAI-compatible client (including :class:`~moralkit.collect.backends.OpenAIBackend`)
can survey a local model, and several collection processes can share one loaded
model. Standard library only (``http.server``; see the README's ``serve`` section
for the measurement behind that choice).

Request fields
    ``model`` (any string: the server has one model), ``messages``, ``temperature``
    (0-2), ``top_p`` (0-1], ``max_tokens`` / ``max_completion_tokens``, ``seed``,
    ``n`` (1 only), ``stream`` (false only), ``logprobs`` and ``top_logprobs``
    (0-20, OpenAI's shape), and vLLM's extensions for scoring given text:
    ``prompt_logprobs`` (0 only: the log-probability of each prompt token, in
    vLLM's response format), ``add_generation_prompt`` and ``skip_special_tokens``.
    A request with ``add_generation_prompt: false`` is scored, not continued (empty
    content). ``user``, ``metadata``, ``store`` and ``service_tier`` are accepted and
    ignored; any other field is refused (HTTP 400 naming it), because silently
    ignoring e.g. ``stop`` would change the answers.

Limits (:class:`ServerLimits`; each refusal is an OpenAI-style error body
``{"error": {"message", "type", "param", "code"}}``)
    * ``max_tokens`` above ``max_tokens`` of the limits: 400 (``param: max_tokens``);
    * a prompt longer than ``max_prompt_tokens`` tokens (after the chat template),
      or prompt + ``max_tokens`` beyond the model's context: 400
      (``code: context_length_exceeded``);
    * a body above ``max_body_bytes``: 413 (the body is not read); no
      ``Content-Length``: 411;
    * every field is validated (type, range, finiteness), 400 naming the field;
      a JSON body that is not an object (``[]``, ``null``) is a 400 too;
    * one generation at a time (the model is one CPU-bound object); at most
      ``max_queue`` requests wait for it, each at most ``queue_timeout`` seconds;
      beyond either, 503 with ``Retry-After``; more than ``max_connections``
      open connections: 503;
    * a generation stops after ``request_timeout`` seconds (504), and as soon as
      its client has disconnected (checked after every token, and while it
      waits in the queue), so an abandoned request frees the model after its
      current forward pass; the prompt's prefill is one such pass, hence the
      small default ``max_prompt_tokens``;
    * a connection that sends nothing for ``read_timeout`` seconds is closed.

It binds to loopback unless ``allow_remote=True``: it has no authentication. The
host is checked before the model loads (:func:`check_host`).

The server's rooms: this module (binding, the HTTP handler, the bounded queue);
:mod:`~moralkit.collect.server_validation` (:class:`ServerLimits`, :class:`ApiError`,
:func:`validate_request`); :mod:`~moralkit.collect.server_engine` (the model: :class:`TransformersEngine`,
:class:`GenerationResult`). Their public names stay importable from here too.

References
----------
Scherrer et al. (2023), Section 3.3 (models served behind an API are surveyed
the same way as local ones). OpenAI API reference, "Create chat completion"
(https://platform.openai.com/docs/api-reference/chat/create): the request fields, and the response's
``logprobs`` as :mod:`~moralkit.collect.server_engine` cites in full.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import select
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..checks import check_int
from ..errors import MoralkitError
from .server_engine import GenerationResult, as_engine
from .server_engine import TransformersEngine as TransformersEngine
from .server_validation import MAX_TOP_LOGPROBS as MAX_TOP_LOGPROBS
from .server_validation import ApiError, ServerLimits, validate_request

__all__ = ["check_host", "make_server", "serve", "start_server_thread"]

# Imported above: names that lived here before the server was split (issue 29); they stay importable from
# this module (``from moralkit.collect.server import ServerLimits``) but belong to, and are documented in,
# server_validation (ServerLimits, ApiError, validate_request, MAX_TOP_LOGPROBS) and server_engine
# (GenerationResult, TransformersEngine).


def check_host(host: str, allow_remote: bool = False) -> str:
    """Refuse a non-loopback ``host`` unless ``allow_remote`` (the server has no authentication).

    Examples
    --------
    >>> check_host("127.0.0.1")
    '127.0.0.1'
    >>> check_host("0.0.0.0")
    Traceback (most recent call last):
    ...
    moralkit.errors.MoralkitError: refusing to bind '0.0.0.0': the server has no authentication; use 127.0.0.1, ::1 or localhost, or pass --allow-remote (allow_remote=True) behind your own access control
    """
    if allow_remote or _is_loopback(host):
        return host
    raise MoralkitError(f"refusing to bind {host!r}: the server has no authentication; use 127.0.0.1, ::1 or "
                        "localhost, or pass --allow-remote (allow_remote=True) behind your own access control")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------- HTTP
#: An oversized body up to this size is read and dropped before the 413 (see ``_read_body``).
_DRAIN_LIMIT = 64 << 20


def _client_gone(sock) -> bool:
    """True when the peer has closed the connection (readable with no data pending)."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Handler(BaseHTTPRequestHandler):
    server_version = "moralkit-serve/0.2"
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.timeout = self.server.limits.read_timeout  # socket timeout: silent connections are closed
        super().setup()
        # headers and body are two writes: without TCP_NODELAY, Nagle's algorithm and the client's delayed
        # ACK hold the body back ~40 ms on every keep-alive request (measured: benchmarks/bench_serve_framework.py)
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):  # quiet by default
        if getattr(self.server, "verbose", False):
            super().log_message(fmt, *args)

    def _send(self, code, obj, headers=None):
        body = json.dumps(obj).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client left
            self.close_connection = True

    def _error(self, e: ApiError):
        self._send(e.status, e.body(), e.headers)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            m = self.server.engine.model if self.server.engine is not None else "loading"
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "local"}]})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        else:
            self._error(ApiError(404, f"unknown path {self.path}", code="not_found"))

    def _read_body(self):
        lim = self.server.limits
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise ApiError(411, "chunked request bodies are not supported; send Content-Length", code="length_required")
        cl = self.headers.get("Content-Length")
        if cl is None:
            self.close_connection = True
            raise ApiError(411, "Content-Length is required", code="length_required")
        try:
            n = int(cl)
        except ValueError:
            n = -1
        if n < 0:
            self.close_connection = True
            raise ApiError(400, f"invalid Content-Length {cl[:40]!r}", code="invalid_value")
        if n > lim.max_body_bytes:
            # the body is read and dropped in small chunks (constant memory), so that the client, still
            # sending it, gets the 413 rather than a reset connection; beyond _DRAIN_LIMIT it is not read
            if n <= _DRAIN_LIMIT:
                left = n
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    left -= len(chunk)
            self.close_connection = True
            raise ApiError(413, f"the request body has {n} bytes; this server accepts at most {lim.max_body_bytes} "
                                "(--max-body-bytes)", code="request_too_large")
        data = self.rfile.read(n)
        if len(data) < n:
            self.close_connection = True
            raise ApiError(400, "the request body ended before Content-Length bytes", code="invalid_value")
        try:
            return json.loads(data.decode("utf-8")) if data else None
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from None

    def do_POST(self):
        try:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self.close_connection = True
                raise ApiError(404, f"unknown path {self.path}; use /v1/chat/completions", code="not_found")
            body = self._read_body()
            srv = self.server
            p = validate_request(body, srv.limits)
            eng = srv.engine
            if eng is None:
                raise ApiError(503, "the model is still loading", code="loading", type="server_error",
                               headers={"Retry-After": 5})
            self._check_prompt(eng, p)
            out = srv.run_exclusive(lambda stop: self._work(eng, p, stop), lambda: _client_gone(self.connection))
            if out is None:  # the client left: nobody to answer
                self.close_connection = True
                return
            self._send(200, out)
        except ApiError as e:
            self._error(e)
        except socket.timeout:
            self.close_connection = True
        except Exception as e:  # pragma: no cover - model failure
            self._error(ApiError(500, f"{type(e).__name__}: {e}", type="server_error", code="server_error"))

    def _check_prompt(self, eng, p):
        lim = self.server.limits
        n = eng.count_tokens(p["messages"])
        p["prompt_tokens"] = n
        if n > lim.max_prompt_tokens:
            raise ApiError(400, f"the prompt has {n} tokens; this server accepts at most {lim.max_prompt_tokens} "
                                "(--max-prompt-tokens)", param="messages", code="context_length_exceeded")
        ctx = getattr(eng, "context_length", None)
        mt = p["sampling"].max_tokens
        if ctx and n + mt > ctx:
            raise ApiError(400, f"the prompt ({n} tokens) plus max_tokens ({mt}) exceed the model's context of "
                                f"{ctx} tokens", param="max_tokens", code="context_length_exceeded")

    def _work(self, eng, p, stop):
        seed = p["seed"]
        seed = int(seed) if seed is not None else int.from_bytes(uuid.uuid4().bytes[:4], "big") & 0x7FFFFFFF
        scored = None
        if p["prompt_logprobs"] is not None:
            scored = eng.prompt_logprobs(p["messages"], add_generation_prompt=p["add_generation_prompt"],
                                         skip_special_tokens=p["skip_special_tokens"])
        if p["add_generation_prompt"]:
            g = eng.generate(p["messages"], p["sampling"], seed, p["top_logprobs"], stop)
            if g.stopped:
                return None
        else:
            g = GenerationResult(text="", finish_reason="length", prompt_tokens=len(scored), completion_tokens=0,
                                 logprobs=[] if p["logprobs"] else None)
        choice = {"index": 0, "message": {"role": "assistant", "content": g.text}, "finish_reason": g.finish_reason,
                  "logprobs": None if g.logprobs is None else {"content": g.logprobs, "refusal": None}}
        out = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion", "created": int(time.time()),
            "model": eng.model, "system_fingerprint": f"seed-{seed}", "choices": [choice],
            "usage": {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
                      "total_tokens": (g.prompt_tokens or 0) + (g.completion_tokens or 0)},
        }
        if scored is not None:  # vLLM's layout: one {token id: {logprob, rank, decoded_token}} per token, None first
            out["prompt_logprobs"] = [None if lp is None else {str(t): {"logprob": lp, "decoded_token": d}}
                                      for t, d, lp in scored]
        return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # a burst of connections queues in the kernel rather than being reset
    request_queue_size = 128

    def __init__(self, addr, engine, limits: ServerLimits, verbose=False):
        self.engine = engine
        self.limits = limits
        self.verbose = verbose
        self._slot = threading.Lock()  # the model: one generation at a time
        self._count_lock = threading.Lock()
        self.admitted = 0  # generating + waiting
        self.connections = 0
        self.stats = {"served": 0, "rejected_busy": 0, "timed_out": 0, "cancelled": 0}
        super().__init__(addr, _Handler)

    @property
    def backend(self):  # the name used before (tests, callers)
        return self.engine

    # -- connections
    def process_request(self, request, client_address):
        with self._count_lock:
            full = self.connections >= self.limits.max_connections
            if not full:
                self.connections += 1
        if full:
            body = json.dumps(ApiError(503, "too many open connections; retry later", code="overloaded",
                                       type="server_error").body()).encode()
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode()
                                + b"\r\n\r\n" + body)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count_lock:
                self.connections -= 1

    # -- the model
    def run_exclusive(self, work, client_gone):
        """Run ``work(stop)`` holding the model, after waiting in the bounded queue.

        Returns None when the client left (while waiting or generating); raises :class:`ApiError`
        503 (queue full or waited too long) or 504 (generation ran past ``request_timeout``).
        """
        lim = self.limits
        with self._count_lock:
            if self.admitted >= 1 + lim.max_queue:
                self.stats["rejected_busy"] += 1
                raise ApiError(503, f"the server is busy ({self.admitted - 1} requests waiting, --max-queue "
                                    f"{lim.max_queue}); retry later", code="overloaded", type="server_error",
                               headers={"Retry-After": max(1, min(60, self.admitted))})
            self.admitted += 1
        try:
            t_wait = time.monotonic() + lim.queue_timeout
            while not self._slot.acquire(timeout=0.05):
                if client_gone():
                    self.stats["cancelled"] += 1
                    return None
                if time.monotonic() > t_wait:
                    self.stats["rejected_busy"] += 1
                    raise ApiError(503, f"waited {lim.queue_timeout:g} s for the model (--queue-timeout); retry later",
                                   code="overloaded", type="server_error",
                                   headers={"Retry-After": max(1, int(lim.queue_timeout // 4))})
            try:
                deadline = time.monotonic() + lim.request_timeout
                state = {}

                def stop():
                    if time.monotonic() > deadline:
                        state["timeout"] = True
                        return True
                    if client_gone():
                        state["gone"] = True
                        return True
                    return False

                out = work(stop)
            finally:
                self._slot.release()
            if out is not None:  # complete, even if a stop check fired on its last step
                self.stats["served"] += 1
                return out
            if state.get("timeout"):
                self.stats["timed_out"] += 1
                raise ApiError(504, f"the generation ran longer than {lim.request_timeout:g} s (--request-timeout) "
                                    "and was stopped; ask for fewer max_tokens", param="max_tokens",
                               code="timeout", type="server_error")
            self.stats["cancelled"] += 1
            return None
        finally:
            with self._count_lock:
                self.admitted -= 1


def make_server(backend, host: str = "127.0.0.1", port: int = 8000, allow_remote: bool = False,
                verbose: bool = False, limits: ServerLimits | None = None) -> ThreadingHTTPServer:
    """An HTTP server (bound, not started) answering chat completions with ``backend``.

    ``backend`` is a :class:`~moralkit.collect.backends.TransformersBackend` (or an object with the engine
    interface of :class:`TransformersEngine`), or None: the server then answers 503 until
    ``server.engine`` is set (used by :func:`serve` to bind before the model loads). ``port=0`` picks a
    free port (``server.server_address[1]``).

    Raises
    ------
    MoralkitError
        A non-loopback ``host`` without ``allow_remote``, a ``port`` outside 0-65535, or an address that
        cannot be bound (a busy port).
    """
    check_host(host, allow_remote)
    port = check_int(port, "port", minimum=0, maximum=65535)
    limits = limits or ServerLimits()
    try:
        return _Server((host, port), as_engine(backend), limits, verbose=verbose)
    except OSError as e:  # a busy port, an address this machine does not have, a privileged port
        raise MoralkitError(f"cannot listen on {host}:{port} ({e.strerror or e}): choose another --port (0 picks a "
                            "free one), or stop the process that holds it") from None


def start_server_thread(backend, host="127.0.0.1", port=0, limits: ServerLimits | None = None):
    """Start :func:`make_server` in a daemon thread; returns ``(server, base_url)``. Stop with ``server.shutdown()``."""
    srv = make_server(backend, host, port, limits=limits)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://{host}:{srv.server_address[1]}/v1"


def serve(model, host="127.0.0.1", port=8000, dtype="bfloat16", batch_size=1, gguf_file=None, allow_remote=False,
          limits: ServerLimits | None = None, threads=None):
    """Serve ``model`` (transformers backend) until interrupted.

    The host is checked and the port bound *before* the model loads, so a refused address or a busy port
    fails at once.
    """
    from .backends import TransformersBackend

    check_host(host, allow_remote)
    srv = make_server(None, host, port, allow_remote=allow_remote, limits=limits)
    try:
        b = TransformersBackend(model, gguf_file=gguf_file, dtype=dtype, batch_size=batch_size, threads=threads)
        srv.engine = as_engine(b)
        print(f"serving {b.model} on http://{host}:{srv.server_address[1]}/v1 (Ctrl-C to stop)", flush=True)
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
