"""A minimal OpenAI-compatible chat-completions server for a local model.

``python -m moralkit serve --model qwen2.5-coder-0.5b-instruct --port 8000``
serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 with a
:class:`~moralkit.collect.backends.TransformersBackend`, so that any
OpenAI-compatible client (including :class:`~moralkit.collect.backends.OpenAIBackend`)
can survey a local model, and several collection processes can share one loaded
model. Standard library only (``http.server``); requests are answered one at a
time (generation holds a lock). Supported request fields: ``model``,
``messages``, ``temperature``, ``top_p``, ``max_tokens`` /
``max_completion_tokens``, ``seed``, ``n`` (1 only), ``stream`` (false only),
and vLLM's extensions for scoring given text: ``prompt_logprobs`` (0 only: the
log-probability of each prompt token, in vLLM's response format),
``add_generation_prompt`` and ``skip_special_tokens``. A request with
``add_generation_prompt: false`` is scored, not continued (empty content).

It binds to loopback unless ``allow_remote=True``: it has no authentication.
``transformers serve`` (transformers 5.x) is an alternative, but it needs FastAPI
and uvicorn and loads GGUF files from the hub only.

References
----------
Scherrer et al. (2023), Section 3.3 (models served behind an API are surveyed
the same way as local ones).
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .backends import Request, Sampling

__all__ = ["make_server", "serve", "start_server_thread"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server_version = "moralkit-serve/0.1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet by default
        if getattr(self.server, "verbose", False):
            super().log_message(fmt, *args)

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code, msg, typ="invalid_request_error"):
        self._send(code, {"error": {"message": msg, "type": typ, "code": code}})

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            b = self.server.backend
            self._send(200, {"object": "list", "data": [{"id": b.model, "object": "model", "owned_by": "local"}]})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"unknown path {self.path}")

    def do_POST(self):
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"unknown path {self.path}; use /v1/chat/completions")
            return
        try:
            n = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(n) or b"{}")
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs or not all(
                    isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role") in
                    ("system", "user", "assistant") for m in msgs):
                raise ValueError("messages must be a non-empty list of {role, content} with text content")
            if body.get("stream"):
                raise ValueError("stream=true is not supported")
            if int(body.get("n", 1) or 1) != 1:
                raise ValueError("only n=1 is supported")
            s = Sampling(temperature=float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0),
                         top_p=float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0),
                         max_tokens=int(body.get("max_completion_tokens") or body.get("max_tokens") or 256))
            agp = body.get("add_generation_prompt", True)
            plp = body.get("prompt_logprobs")
            sst = body.get("skip_special_tokens", True)
            if not isinstance(agp, bool) or not isinstance(sst, bool):
                raise ValueError("add_generation_prompt and skip_special_tokens must be true or false")
            if plp is not None and (isinstance(plp, bool) or plp != 0):
                raise ValueError(f"prompt_logprobs must be null or 0 (the prompt token's own log-probability), "
                                 f"got {plp!r}")
            if not agp and plp is None:
                raise ValueError("add_generation_prompt=false is only supported with prompt_logprobs=0 (scoring)")
            seed = body.get("seed")
            seed = int(seed) if seed is not None else int.from_bytes(uuid.uuid4().bytes[:4], "big") & 0x7FFFFFFF
            req = Request(messages=tuple({"role": m["role"], "content": m["content"]} for m in msgs), seed=seed,
                          sampling=s)
        except (ValueError, TypeError, json.JSONDecodeError) as e:
            self._error(400, str(e))
            return
        b = self.server.backend
        try:
            scored = None
            if plp is not None:
                scored = b.prompt_logprobs(req.messages, add_generation_prompt=agp, skip_special_tokens=sst)
            if agp:
                c = b.generate([req])[0]
                text, finish, n_prompt, n_out = c.text, c.finish_reason, c.prompt_tokens, c.completion_tokens
            else:
                text, finish, n_prompt, n_out = "", "length", len(scored), 0
        except Exception as e:  # pragma: no cover - model failure
            self._error(500, f"{type(e).__name__}: {e}", "server_error")
            return
        out = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion", "created": int(time.time()),
            "model": b.model, "system_fingerprint": f"seed-{seed}",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out,
                      "total_tokens": (n_prompt or 0) + (n_out or 0)},
        }
        if scored is not None:  # vLLM's layout: one {token id: {logprob, rank, decoded_token}} per token, None first
            out["prompt_logprobs"] = [None if lp is None else {str(t): {"logprob": lp, "decoded_token": d}}
                                      for t, d, lp in scored]
        self._send(200, out)


def make_server(backend, host: str = "127.0.0.1", port: int = 8000, allow_remote: bool = False,
                verbose: bool = False) -> ThreadingHTTPServer:
    """An HTTP server (not started) answering chat completions with ``backend``.

    ``port=0`` picks a free port (``server.server_address[1]``).
    """
    if not allow_remote and not _is_loopback(host):
        raise ValueError(f"refusing to bind {host!r}: the server has no authentication; use 127.0.0.1 "
                         "(or pass allow_remote=True behind your own access control)")
    srv = ThreadingHTTPServer((host, int(port)), _Handler)
    srv.daemon_threads = True
    srv.backend = backend
    srv.verbose = verbose
    return srv


def start_server_thread(backend, host="127.0.0.1", port=0):
    """Start :func:`make_server` in a daemon thread; returns ``(server, base_url)``. Stop with ``server.shutdown()``."""
    srv = make_server(backend, host, port)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://{host}:{srv.server_address[1]}/v1"


def serve(model, host="127.0.0.1", port=8000, dtype="bfloat16", batch_size=1, gguf_file=None, allow_remote=False):
    """Load ``model`` with the transformers backend and serve it until interrupted."""
    from .backends import TransformersBackend

    b = TransformersBackend(model, gguf_file=gguf_file, dtype=dtype, batch_size=batch_size)
    srv = make_server(b, host, port, allow_remote=allow_remote)
    print(f"serving {b.model} on http://{host}:{srv.server_address[1]}/v1 (Ctrl-C to stop)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
