"""A fault-injecting OpenAI-compatible server on 127.0.0.1, for testing collection (standard library only).

It is a *test double*, not a model: its answers are a hash of the prompt and the seed (so a request's
answer depends only on its own prompt and seed, as with a real seeded model), and nothing it returns
is ever data. With probability ``rate`` a request gets one of :data:`FAULTS` instead:

========================  ================================================================
``429``                   HTTP 429 with ``Retry-After``
``500``, ``503``          server errors (503 with ``Retry-After``; 500 echoes the API key: redaction must hide it)
``400``                   HTTP 400 whose message echoes the API key (fatal: the run stops; not drawn by default)
``timeout``               no answer for ``hang`` seconds, then the connection is closed
``drop``                  the connection is closed without a response
``bad_json``              a 200 whose JSON body is cut off
``html``                  a 200 with an HTML page
``choices_object``        ``choices`` is an object, not a list
``no_message``            a choice without ``message``
``empty_choices``         ``choices: []``
``null_content``          ``content: null``
``surrogate``             a usable answer followed by a lone surrogate (``\\ud83d``)
``401``, ``404``          wrong key, unknown model (:data:`FATAL_FAULTS`: not drawn unless named in ``faults``)
========================  ================================================================

With ``echo=True`` every error body also echoes what a careless server or proxy could: the request's
``Authorization`` header, the key, and its base64 forms (``Basic base64("user:" + key)``,
``base64(key)``), so that a test can check that none of them is ever written or printed.

A request with vLLM's extensions (``prompt_logprobs``, ``add_generation_prompt``) is answered as vLLM
would: the conversation is rendered with a small chat template (``<|role|>\\ncontent<|end|>\\n``),
cut into tokens (special tokens, words, spaces, punctuation), and ``prompt_logprobs`` gives every
token a log-probability that is a hash of the text before it and the token (so a scored answer
depends only on the conversation); ``usage.prompt_tokens`` is the number of tokens.

A request with ``logprobs: true`` gets OpenAI's ``choices[0].logprobs.content`` for one token: the
first ``top_logprobs`` alternatives of a **known** first-token distribution
(:func:`fake_token_distribution`, a function of the question only), and the token drawn from it with the
request's seed as the answer, so a test can check that an estimator recovers that distribution.

Every usable answer it sends is logged (:attr:`FaultServer.usable`), so a test can check that none
was discarded. Loops are bounded: a handler sleeps at most ``hang`` seconds, and the server stops
itself after ``max_seconds``.

Examples
--------
>>> with FaultServer(rate=0.0) as srv:
...     srv.url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .httpfake import LoopbackServer

__all__ = ["FaultServer", "FAULTS", "TRANSIENT_FAULTS", "FATAL_FAULTS", "USABLE_FAULTS", "fake_answer",
           "fake_prompt_logprobs", "fake_token_distribution", "render_chat"]

FAULTS = ("429", "500", "503", "400", "timeout", "drop", "bad_json", "html", "choices_object", "no_message",
          "empty_choices", "null_content", "surrogate")

#: Faults a collection retries (all but ``400``: a 400 is the client's error and stops the run at once);
#: the default draw.
TRANSIENT_FAULTS = tuple(f for f in FAULTS if f != "400")

#: Faults whose response still carries a usable answer.
USABLE_FAULTS = ("surrogate",)

#: Faults that no retry can fix (the collectors stop at once); drawn only when named in ``faults``.
FATAL_FAULTS = ("401", "404")

_TOKEN = re.compile(r"<\|\w+\|>|\s+|\w+|[^\w\s]")


def render_chat(messages, add_generation_prompt=True) -> str:
    """The double's chat template: ``<|role|>\\ncontent<|end|>\\n`` per message, then ``<|assistant|>\\n``."""
    text = "".join(f"<|{m.get('role')}|>\n{m.get('content')}<|end|>\n" for m in messages)
    return text + ("<|assistant|>\n" if add_generation_prompt else "")


def fake_prompt_logprobs(text: str) -> list:
    """vLLM-style ``prompt_logprobs`` of ``text`` (``prompt_logprobs=0``): ``None``, then one
    ``{token_id: {logprob, rank, decoded_token}}`` per token; a function of the text only."""
    toks = _TOKEN.findall(text)
    out, pos = [None], len(toks[0]) if toks else 0
    for tok in toks[1:]:
        lp = -((_h(text[:pos], tok) % 5000) / 1000.0 + 0.001)
        out.append({str(_h(tok) % 50000): {"logprob": lp, "rank": 1, "decoded_token": tok}})
        pos += len(tok)
    return out


def _h(*parts) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()[:8], "big")


def fake_answer(messages, seed) -> str:
    """The double's answer: a function of the prompt and the seed only.

    Round 0 of the PSM gets ``Answers: [...]``; a constrained round ``Option k``; a MoralChoice
    A/B question ``A`` or ``B``; a yes/no question ``Yes`` or ``No``; anything else ``A``.
    """
    prompt = messages[-1]["content"] if messages else ""
    h = _h(messages, seed)
    if prompt.startswith("Please answer the following questions"):
        return "Answers: [" + ", ".join(str((h >> (3 * i)) % 6) for i in range(5)) + "]"
    if "Option 1:" in prompt:
        return f"Option {h % 100 + 1}"
    if "Respond solely with A or B" in prompt:
        return "AB"[h % 2]
    if "yes or no" in prompt:
        return ("Yes", "No")[h % 2]
    if "repeating one of the following options" in prompt:  # MoralChoice's repeat form: one option, verbatim
        options = [ln[2:].strip() for ln in prompt.splitlines() if ln.startswith("- ")]
        if options:
            return options[h % len(options)]
    return "A"


#: The spellings of the double's first-token distribution (shares within each answer) and its tokens that
#: map to no answer (their probabilities).
_SPELLINGS = {"ab": (("A", " A", "a"), ("B", " B", "b")), "compare": (("Yes", " yes", "yes"), ("No", " no", "no"))}
_SHARES = (0.7, 0.2, 0.1)
_OTHER = {"I": 0.06, "The": 0.04}


def fake_token_distribution(messages) -> dict:
    """The double's first-token distribution ``{token: probability}`` (summing to 1) for a question.

    For a MoralChoice A/B (``Respond solely with A or B``) or yes/no question, the first-shown answer
    (``A`` / ``Yes``) gets the share ``0.05 + 0.9 u`` of the answer mass 0.9, with ``u`` in [0, 1) a hash
    of the last message (so it differs by scenario and ordering); each answer's mass is spread over three
    spellings (0.7, 0.2, 0.1: ``"A"``, ``" A"``, ``"a"``), and ``"I"`` (0.06) and ``"The"`` (0.04) map to
    no answer. Anything else: ``{"A": 1.0}``.

    Examples
    --------
    >>> d = fake_token_distribution([{"role": "user", "content": "Respond solely with A or B."}])
    >>> round(sum(d.values()), 12), round(d["I"], 2)
    (1.0, 0.06)
    """
    prompt = messages[-1]["content"] if messages else ""
    q = "ab" if "Respond solely with A or B" in prompt else "compare" if "yes or no" in prompt else None
    if q is None:
        return {"A": 1.0}
    first = 0.05 + 0.9 * (_h("distribution", prompt) % 1000) / 1000
    mass = 1.0 - sum(_OTHER.values())
    dist = {}
    for share, spellings in zip((first, 1.0 - first), _SPELLINGS[q]):
        for tok, w in zip(spellings, _SHARES):
            dist[tok] = mass * share * w
    dist.update(_OTHER)
    return dist


def _logprobs_choice(messages, seed, k) -> tuple[str, dict]:
    """The drawn token and OpenAI's ``logprobs`` object (one token, its ``k`` most likely alternatives)."""
    import math

    dist = fake_token_distribution(messages)
    ranked = sorted(dist.items(), key=lambda kv: (-kv[1], kv[0]))
    u = (_h("draw", messages, seed) % 1_000_000) / 1_000_000
    acc, tok = 0.0, ranked[-1][0]
    for t, p in ranked:
        acc += p
        if u < acc:
            tok = t
            break

    def entry(t):
        return {"token": t, "logprob": math.log(dist[t]), "bytes": list(t.encode())}

    top = [entry(t) for t, _ in ranked[:max(0, int(k))]]
    return tok, {"content": [{**entry(tok), "top_logprobs": top}], "refusal": None}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _send(self, code, body: bytes, ctype="application/json", headers=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client was killed or gave up: that is the test
            self.close_connection = True

    def _json(self, code, obj, headers=None):
        self._send(code, json.dumps(obj).encode(), headers=headers)

    def do_GET(self):
        self._json(200, {"object": "list", "data": [{"id": "fault-double", "object": "model"}]})

    def _echo(self) -> str:
        srv: FaultServer = self.server.owner
        if not srv.echo:
            return ""
        auth = self.headers.get("Authorization", "")
        basic = base64.b64encode(f"user:{srv.api_key}".encode()).decode()
        return (f" (received Authorization: {auth}; as Basic auth: Basic {basic}; key base64 "
                f"{base64.b64encode(srv.api_key.encode()).decode()}; key {srv.api_key})")

    def do_POST(self):
        srv: FaultServer = self.server.owner
        n = int(self.headers.get("Content-Length", "0"))
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self._json(400, {"error": {"message": "bad request body"}})
        if not isinstance(req, dict):
            return self._json(400, {"error": {"message": "the body is not a JSON object"}})
        fault, delay = srv._draw(req)
        if delay:
            time.sleep(delay)
        if fault in ("timeout", "drop"):
            if fault == "timeout":
                time.sleep(srv.hang)
            self.close_connection = True
            return
        ra = {"Retry-After": str(srv.retry_after)}
        echo = self._echo()
        if fault == "429":
            return self._json(429, {"error": {"message": "rate limited" + echo, "type": "rate_limit"}}, ra)
        if fault in ("500", "503"):
            msg = f"server error for key {srv.api_key}" if fault == "500" else "server error"
            return self._json(int(fault), {"error": {"message": msg + echo}},
                              ra if fault == "503" else None)
        if fault == "400":
            return self._json(400, {"error": {"message": f"invalid request for key {srv.api_key}" + echo,
                                              "type": "invalid_request_error"}})
        if fault == "401":
            return self._json(401, {"error": {"message": f"Incorrect API key provided: {srv.api_key}" + echo,
                                              "type": "invalid_request_error", "code": "invalid_api_key"}})
        if fault == "404":
            return self._json(404, {"error": {"message": f"The model {req.get('model')!r} does not exist" + echo,
                                              "type": "invalid_request_error", "code": "model_not_found"}})
        messages = req.get("messages", [])
        lp = None
        if req.get("logprobs"):  # OpenAI's logprobs / top_logprobs: one token of the known distribution
            text, lp = _logprobs_choice(messages, req.get("seed"), req.get("top_logprobs") or 0)
        else:
            text = fake_answer(messages, req.get("seed"))
        usage = srv._usage(req, text)
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if lp is not None:
            choice["logprobs"] = lp
        body = {"id": "fault", "object": "chat.completion", "created": 0, "model": req.get("model", "fault-double"),
                "choices": [choice], "usage": usage}
        if "prompt_logprobs" in req or "add_generation_prompt" in req:  # vLLM's extensions: score the prompt
            rendered = render_chat(messages, bool(req.get("add_generation_prompt", True)))
            plp = fake_prompt_logprobs(rendered)
            usage.update(prompt_tokens=len(plp), total_tokens=len(plp) + 2)
            if req.get("prompt_logprobs") is not None:
                body["prompt_logprobs"] = plp
        if fault == "bad_json":
            return self._send(200, json.dumps(body).encode()[:40])
        if fault == "html":
            return self._send(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
        if fault == "choices_object":
            body["choices"] = {"0": choice}
        elif fault == "no_message":
            del choice["message"]
        elif fault == "empty_choices":
            body["choices"] = []
        elif fault == "null_content":
            choice["message"]["content"] = None
        elif fault == "surrogate":
            choice["message"]["content"] = text + " \ud83d"
        usable = fault in (None, "surrogate")
        if usable:
            srv._log(req, choice["message"]["content"])
            with srv._lock:
                srv.billed[0] += body["usage"]["prompt_tokens"]
                srv.billed[1] += body["usage"]["completion_tokens"]
        self._json(200, body)


class FaultServer(LoopbackServer):
    """Start with ``with FaultServer(...) as srv:`` (or :meth:`start` / :meth:`stop`); ``srv.url`` is the base URL.

    Parameters
    ----------
    rate : float
        Probability that a request gets a fault.
    faults : tuple of str
        Which faults to draw from (default :data:`TRANSIENT_FAULTS`, every fault but ``400``).
    seed : int
        Seeds the fault draws (request ``n`` gets the ``n``-th draw).
    hang : float
        Seconds a ``timeout`` fault holds the connection (set the client timeout below it).
    retry_after : int
        ``Retry-After`` seconds of 429 and 503.
    latency : callable, optional
        ``latency(request_json) -> seconds`` to sleep before answering (slow requests).
    api_key : str
        The key the 400, 401 and 500 faults echo back.
    echo : bool
        Every error body also echoes the ``Authorization`` header, the key and its base64 forms.
    max_seconds : float
        The server shuts itself down after this long.
    usage : callable, optional
        ``usage(request_json, answer_text) -> (prompt_tokens, completion_tokens)``, the token counts the
        response reports (default 10 and 2), e.g. counted with a real tokenizer to test cost accounting.
    """

    def __init__(self, rate=0.0, faults=TRANSIENT_FAULTS, seed=0, hang=3.0, retry_after=1, latency=None,
                 api_key="sk-test-fault-server-key-0000", max_seconds=600.0, echo=False, usage=None):
        bad = [f for f in faults if f not in FAULTS + FATAL_FAULTS]
        if bad or not 0 <= rate <= 1:
            raise ValueError(f"unknown faults {bad} or rate {rate} outside [0, 1]; faults: {FAULTS}")
        self.rate, self.faults, self.seed = float(rate), tuple(faults), int(seed)
        self.hang, self.retry_after, self.latency = float(hang), int(retry_after), latency
        self.api_key = api_key
        self.echo = bool(echo)
        self.max_seconds = float(max_seconds)
        self.n = 0
        self.counts: dict = {}
        self.usable: list = []  # (seed, text) of every usable answer sent
        self.usage = usage
        self.billed = [0, 0]  # prompt and completion tokens of every usable answer sent
        self._lock = threading.Lock()
        self._httpd = None

    def _draw(self, req):
        with self._lock:
            self.n += 1
            rng = random.Random(_h(self.seed, self.n))
            fault = rng.choice(self.faults) if self.faults and rng.random() < self.rate else None
            self.counts[fault] = self.counts.get(fault, 0) + 1
        return fault, (self.latency(req) if self.latency else 0.0)

    def _usage(self, req, text) -> dict:
        pt, ct = self.usage(req, text) if self.usage else (10, 2)
        return {"prompt_tokens": int(pt), "completion_tokens": int(ct), "total_tokens": int(pt) + int(ct)}

    def _log(self, req, text):
        with self._lock:
            self.usable.append((req.get("seed"), text))

    def _make_httpd(self):
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        return httpd

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

