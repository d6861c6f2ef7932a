"""The HTTP layer of `moralkit serve`: the standard library's ``http.server`` against an ASGI stack.

Both servers answer ``POST /v1/chat/completions`` with the same validation
(:func:`moralkit.collect.server.validate_request`) and a no-op engine (no model), so that only the HTTP
layer is measured:

- ``stdlib``: ``moralkit.collect.server`` as shipped (``ThreadingHTTPServer``);
- ``asgi``: a Starlette app under uvicorn (what ``transformers serve`` builds on, with FastAPI), the engine
  run in a worker thread, ``limit_concurrency`` 64.

Measured through the official ``openai`` SDK in one process: the latency of sequential requests (median,
p95), and the throughput of 8 client threads. The servers are run alternately (stdlib, asgi, stdlib without
TCP_NODELAY, and again) to share the machine's load; the third is ``http.server`` as it was before moralkit set
TCP_NODELAY, to show what the option is worth. Prints one JSON line with the numbers, the load average and the date.

uvicorn and starlette are not dependencies of moralkit: install them outside the environment to run this,
e.g. ``pip install --target /tmp/asgi uvicorn==0.54.0 starlette==1.10.0`` and pass ``--asgi-path /tmp/asgi``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class NoopEngine:
    model = "noop"
    context_length = 4096

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages) // 4 + 1

    def generate(self, messages, sampling, seed, top_logprobs, should_stop):
        from moralkit.collect.server import GenerationResult

        should_stop()
        return GenerationResult("A", "stop", self.count_tokens(messages), 1)


def start_asgi(engine):
    import asyncio

    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from moralkit.collect.server import ApiError, ServerLimits, validate_request

    limits = ServerLimits()
    slot = asyncio.Semaphore(1)

    async def chat(request):
        try:
            n = int(request.headers.get("content-length", "0"))
            if n > limits.max_body_bytes:
                raise ApiError(413, "too large", code="request_too_large")
            try:
                body = json.loads(await request.body())
            except ValueError as e:
                raise ApiError(400, f"not JSON: {e}") from None
            p = validate_request(body, limits)
            async with slot:
                g = await run_in_threadpool(engine.generate, p["messages"], p["sampling"], 0, None, lambda: False)
        except ApiError as e:
            return JSONResponse(e.body(), status_code=e.status)
        return JSONResponse({"id": "chatcmpl-x", "object": "chat.completion", "created": int(time.time()),
                             "model": engine.model,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": g.text},
                                          "finish_reason": g.finish_reason, "logprobs": None}],
                             "usage": {"prompt_tokens": g.prompt_tokens, "completion_tokens": 1,
                                       "total_tokens": g.prompt_tokens + 1}})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                           limit_concurrency=64))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{port}/v1"


def start_nagle(engine):
    """``moralkit.collect.server`` as shipped but with TCP_NODELAY switched off again on every connection: the
    server before it set the option (Nagle's algorithm holds the body back until the client's delayed ACK)."""
    from moralkit.collect.server import start_server_thread

    srv, url = start_server_thread(engine)

    class NagleHandler(srv.RequestHandlerClass):
        def setup(self):
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)

    srv.RequestHandlerClass = NagleHandler  # read per connection; no request has been sent yet
    return srv, url


def measure(url, n_seq, n_conc):
    import openai

    c = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0)
    body = dict(model="noop", messages=[{"role": "user", "content": "Say A or B."}], max_tokens=1)
    c.chat.completions.create(**body)
    lat = []
    for _ in range(n_seq):
        t0 = time.perf_counter()
        c.chat.completions.create(**body)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    clients = [openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0) for _ in range(8)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: [clients[k].chat.completions.create(**body) for _ in range(n_conc)], range(8)))
    wall = time.perf_counter() - t0
    return dict(median_ms=round(1000 * statistics.median(lat), 2), p95_ms=round(1000 * lat[int(0.95 * len(lat))], 2),
                concurrent_req_per_s=round(8 * n_conc / wall, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--asgi-path", default=None, help="folder holding uvicorn and starlette (appended to sys.path)")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--conc", type=int, default=40)
    a = ap.parse_args()
    if a.asgi_path:
        sys.path.append(a.asgi_path)  # after the environment: its own packages win
    import starlette
    import uvicorn

    from moralkit.collect.server import start_server_thread

    eng = NoopEngine()
    std, std_url = start_server_thread(eng)
    asg, asg_url = start_asgi(eng)
    nagle, nagle_url = start_nagle(eng)
    res = {"stdlib": [], "asgi": [], "stdlib_without_nodelay": []}
    try:
        for _ in range(2):
            res["stdlib"].append(measure(std_url, a.n, a.conc))
            res["asgi"].append(measure(asg_url, a.n, a.conc))
            res["stdlib_without_nodelay"].append(measure(nagle_url, a.n, a.conc))
    finally:
        std.shutdown()
        nagle.shutdown()
        asg.should_exit = True
    print(json.dumps(dict(benchmark="serve_framework", requests_sequential=a.n, requests_concurrent=8 * a.conc,
                          uvicorn=uvicorn.__version__, starlette=starlette.__version__, **res,
                          loadavg=os.getloadavg(),
                          date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))))


if __name__ == "__main__":
    main()
