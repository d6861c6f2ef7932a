"""A fake of OpenAI's files + batches and Anthropic's message batches on 127.0.0.1 (tests only, never data).

One server (standard library only) answers the endpoints the official ``openai`` and ``anthropic``
clients call for batch work, with each provider's state machine:

- OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files``, ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``;
  a batch goes ``validating`` → ``in_progress`` → ``finalizing`` → ``completed`` as it is polled, or
  ``failed`` (validation) or ``expired`` (some requests done, the others in the error file with code
  ``batch_expired``). Also ``POST /v1/chat/completions`` (with ``n``), the online endpoint, so that an
  online run and a batch run can be compared on the same answers.
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches``, ``GET .../{id}``,
  ``GET .../{id}/results`` (JSONL), ``POST .../{id}/cancel``; ``processing_status`` ``in_progress`` →
  ``ended``, results ``succeeded`` / ``errored`` / ``expired``.

Answers are :func:`batch_answer`: a hash of the prompt, the seed and the choice index
(:func:`moralkit.testing.faultserver.fake_answer`), or, for ``invalid_pct`` percent of (prompt, seed)
pairs, a refusal that no parser accepts, so that retries of invalid answers are exercised. A batch's
answers are therefore the online endpoint's answers to the same request.

The server counts what it does (:attr:`FakeBatchServer.counts`) and logs every request line of every
batch with its outcome (:attr:`FakeBatchServer.lines`), so a test can count requests submitted twice.
``hold`` makes a handler wait after it has acted and before it answers (``upload``, ``create``), so a
test can kill the client in that window.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import random
import threading
import time
from email import policy as _policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .faultserver import fake_answer
from .httpfake import LoopbackServer

__all__ = ["FakeBatchServer", "batch_answer", "body_hash"]

REFUSAL = "I would rather not choose."


def _h(*parts) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()[:8], "big")


def body_hash(body) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def batch_answer(messages, seed, index: int = 0, invalid_pct: int = 0) -> str:
    """The fake's answer to choice ``index`` of a request: a function of prompt, seed and index only."""
    s = seed if index == 0 else [seed, index]
    if invalid_pct and _h(messages, s, "invalid") % 100 < invalid_pct:
        return REFUSAL
    return fake_answer(messages, s)


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat().replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, body: bytes, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client was killed: that is the test
            self.close_connection = True

    def _json(self, code, obj):
        self._send(code, json.dumps(obj).encode())

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.server.owner._route(self, "GET")

    def do_POST(self):
        self.server.owner._route(self, "POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # a client killed mid-request: that is what the kill tests do
        super().handle_error(request, client_address)


class FakeBatchServer(LoopbackServer):
    """Start with ``with FakeBatchServer(...) as srv:``; ``srv.openai_url`` and ``srv.anthropic_url`` are the base URLs.

    Parameters
    ----------
    polls_to_finish : int
        Polls of a batch (``GET``) before it ends (the first one moves it out of ``validating``).
    fail_pct : int
        Percent of request lines answered with an error (HTTP 500 in OpenAI's error file, ``errored`` at
        Anthropic), drawn per (batch, line).
    expire_batches : tuple of int
        Ordinals (1-based, in creation order) of batches that expire: their even-numbered lines are
        done, the others expire.
    fail_batches : tuple of int
        Ordinals of OpenAI batches that fail validation (status ``failed``, no output).
    invalid_pct : int
        Percent of (prompt, seed) pairs answered with a refusal (see :func:`batch_answer`).
    seed : int
        Seeds the per-line fault draws.
    max_seconds : float
        The server stops itself after this long.
    openai_models : dict, optional
        Model name -> :class:`moralkit.testing.fake_openai.ModelSpec`: each OpenAI batch line is checked as
        the online endpoint checks it (:func:`moralkit.testing.fake_openai.reject`: a reasoning model refuses
        ``max_tokens`` and ``top_p``; the line gets the 400 in the error file) and answered as it answers
        (reasoning tokens spent from ``max_completion_tokens``). Default: any model, hash answers.
    prompt_tokens : callable, optional
        ``prompt_tokens(messages) -> int``, the input tokens billed per request (default 10).
    """

    def __init__(self, polls_to_finish=3, fail_pct=0, expire_batches=(), fail_batches=(), invalid_pct=0, seed=0,
                 max_seconds=900.0, openai_models=None, prompt_tokens=None):
        self.polls_to_finish = int(polls_to_finish)
        self.fail_pct, self.invalid_pct, self.seed = int(fail_pct), int(invalid_pct), int(seed)
        self.expire_batches, self.fail_batches = set(expire_batches), set(fail_batches)
        self.max_seconds = float(max_seconds)
        self.openai_models = openai_models
        self.prompt_tokens = prompt_tokens
        self.files: dict = {}
        self.batches: dict = {}  # OpenAI
        self.mbatches: dict = {}  # Anthropic
        self.order: list = []  # batch ids in creation order (both kinds)
        self.lines: list = []  # (batch id, custom_id, body hash, outcome) of every line processed
        self.online: list = []  # body hashes of online chat completions answered
        self.counts: dict = {}
        self.hold: dict = {}
        self._lock = threading.Lock()
        self._httpd = None

    # ------------------------------------------------------------------ plumbing
    def _make_httpd(self):
        httpd = _Server(("127.0.0.1", 0), _Handler)
        return httpd


    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, k):
        with self._lock:
            self.counts[k] = self.counts.get(k, 0) + 1

    def _hold(self, k):
        d = self.hold.get(k, 0.0)
        if d:
            time.sleep(d)

    def _route(self, h, method):
        path = urlsplit(h.path).path
        q = parse_qs(urlsplit(h.path).query)
        parts = [p for p in path.split("/") if p]
        try:
            if parts[:1] != ["v1"]:
                return h._json(404, {"error": {"message": f"no route {path}"}})
            p = parts[1:]
            if method == "POST" and p == ["chat", "completions"]:
                return self._chat(h)
            if p[:1] == ["files"]:
                if method == "POST" and len(p) == 1:
                    return self._upload(h)
                if method == "GET" and len(p) == 1:
                    return h._json(200, self._page([f["obj"] for f in self.files.values()
                                                    if not q.get("purpose") or f["obj"]["purpose"] == q["purpose"][0]]))
                if method == "GET" and len(p) == 3 and p[2] == "content":
                    f = self.files.get(p[1])
                    return h._send(200, f["data"], "application/octet-stream") if f else h._json(404, {"error": {
                        "message": "no such file"}})
            if p[:1] == ["batches"]:
                if method == "POST" and len(p) == 1:
                    return self._create(h)
                if method == "GET" and len(p) == 1:
                    objs = [self.batches[i]["obj"] for i in reversed(self.order) if i in self.batches]
                    return h._json(200, self._page(objs, q))
                if method == "GET" and len(p) == 2:
                    return self._retrieve(h, p[1])
                if method == "POST" and len(p) == 3 and p[2] == "cancel":
                    b = self.batches[p[1]]
                    b["obj"]["status"] = "cancelled"
                    return h._json(200, b["obj"])
            if p[:2] == ["messages", "batches"]:
                r = p[2:]
                if method == "POST" and not r:
                    return self._mcreate(h)
                if method == "GET" and not r:
                    objs = [self.mbatches[i]["obj"] for i in reversed(self.order) if i in self.mbatches]
                    return h._json(200, self._mpage(objs, q))
                if method == "GET" and len(r) == 1:
                    return self._mretrieve(h, r[0])
                if method == "GET" and len(r) == 2 and r[1] == "results":
                    b = self.mbatches[r[0]]
                    return h._send(200, b["results"], "application/binary")
            return h._json(404, {"error": {"message": f"no route {method} {path}"}})
        except KeyError as e:
            return h._json(404, {"error": {"type": "not_found_error", "message": f"not found: {e}"}})
        except (ValueError, TypeError, AttributeError) as e:
            # a malformed or truncated body (e.g. from a client killed mid-request): the providers answer
            # 400 invalid_request_error, Anthropic inside a {"type": "error"} envelope
            err = {"type": "invalid_request_error", "message": f"could not parse the request body: {e}"}
            if parts[1:3] == ["messages", "batches"]:
                return h._json(400, {"type": "error", "error": err})
            return h._json(400, {"error": {**err, "param": None, "code": None}})

    @staticmethod
    def _page(objs, q=None):
        after = (q or {}).get("after", [None])[0]
        if after:
            ids = [o["id"] for o in objs]
            objs = objs[ids.index(after) + 1:] if after in ids else []
        limit = int((q or {}).get("limit", [100])[0])
        page = objs[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(objs) > limit}

    @staticmethod
    def _mpage(objs, q):
        after = q.get("after_id", [None])[0]
        if after:
            ids = [o["id"] for o in objs]
            objs = objs[ids.index(after) + 1:] if after in ids else []
        limit = int(q.get("limit", [20])[0])
        page = objs[:limit]
        return {"data": page, "has_more": len(objs) > limit, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None}

    # ------------------------------------------------------------------ answers
    def _completion(self, body):
        msgs, seed, n = body.get("messages", []), body.get("seed"), int(body.get("n", 1) or 1)
        if self.openai_models is not None and n == 1:
            from .fake_openai import completion

            spec = self.openai_models[body.get("model")]
            return completion(body, spec, prompt_tokens=self.prompt_tokens)
        texts = [batch_answer(msgs, seed, j, self.invalid_pct) for j in range(n)]
        n_in = 10 if self.prompt_tokens is None else self.prompt_tokens(msgs)
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": j, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                            for j, t in enumerate(texts)],
                "usage": {"prompt_tokens": n_in, "completion_tokens": 2 * n, "total_tokens": n_in + 2 * n}}

    def _refused(self, body):
        """The 400 body an OpenAI batch line earns (with ``openai_models``), or None."""
        if self.openai_models is None:
            return None
        from .fake_openai import openai_error, reject

        spec = self.openai_models.get(body.get("model"))
        if spec is None:
            return openai_error(f"The model `{body.get('model')}` does not exist or you do not have access to it.",
                                 param="model", code="model_not_found")
        return reject(body, spec)

    def _chat(self, h):
        body = json.loads(h._body() or b"{}")
        self._count("chat")
        with self._lock:
            self.online.append(body_hash(body))
            self.last_chat_body = body
        return h._json(200, self._completion(body))

    # ------------------------------------------------------------------ OpenAI files + batches
    def _upload(self, h):
        raw = h._body()
        msg = BytesParser(policy=_policy.default).parsebytes(b"Content-Type: " + h.headers["Content-Type"].encode() + b"\r\n\r\n" + raw)
        fields, data, name = {}, None, None
        for part in msg.iter_parts():
            pname = part.get_param("name", header="content-disposition")
            if part.get_filename():
                data, name = part.get_payload(decode=True), part.get_filename()
            else:
                fields[pname] = part.get_payload(decode=True).decode()
        with self._lock:
            fid = f"file-{len(self.files) + 1:06d}{random.Random(len(self.files)).getrandbits(24):06x}"
            obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()), "filename": name,
                   "purpose": fields.get("purpose"), "status": "processed"}
            self.files[fid] = {"obj": obj, "data": data}
        self._count("upload")
        self._hold("upload")
        return h._json(200, obj)

    def _create(self, h):
        req = json.loads(h._body())
        if req.get("input_file_id") not in self.files:
            return h._json(400, {"error": {"message": "no such input file", "type": "invalid_request_error"}})
        with self._lock:
            bid = f"batch_{len(self.order) + 1:06d}"
            self.order.append(bid)
            obj = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "errors": None,
                   "input_file_id": req["input_file_id"], "completion_window": req["completion_window"],
                   "status": "validating", "output_file_id": None, "error_file_id": None,
                   "created_at": int(time.time()), "request_counts": {"total": 0, "completed": 0, "failed": 0},
                   "metadata": req.get("metadata")}
            self.batches[bid] = {"obj": obj, "polls": 0, "ordinal": len(self.order)}
        self._count("create")
        self._hold("create")
        return h._json(200, obj)

    def _retrieve(self, h, bid):
        b = self.batches[bid]
        self._count("poll")
        with self._lock:
            self._advance(b)
        return h._json(200, b["obj"])

    def _advance(self, b):
        o = b["obj"]
        if o["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        b["polls"] += 1
        lines = [json.loads(x) for x in self.files[o["input_file_id"]]["data"].splitlines() if x.strip()]
        o["request_counts"]["total"] = len(lines)
        if b["ordinal"] in self.fail_batches:
            o["status"] = "failed"
            o["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": "validation failed",
                                                       "line": 1, "param": None}]}
            for ln in lines:
                self.lines.append((o["id"], ln["custom_id"], body_hash(ln["body"]), "failed"))
            return
        if b["polls"] == 1:
            return  # still validating
        if b["polls"] < self.polls_to_finish:
            o["status"] = "in_progress"
            o["request_counts"]["completed"] = len(lines) * (b["polls"] - 1) // self.polls_to_finish
            return
        if o["status"] != "finalizing":
            o["status"] = "finalizing"
            return
        expire = b["ordinal"] in self.expire_batches
        out, err = [], []
        for i, ln in enumerate(lines):
            rid = f"batch_req_{o['id']}_{i}"
            if expire and i % 2:
                err.append({"id": rid, "custom_id": ln["custom_id"], "response": None,
                            "error": {"code": "batch_expired", "message": "This request could not be executed "
                                                                          "before the completion window expired."}})
                outcome = "expired"
            # keyed on the batch's ordinal and the request body, not on the custom_id (which carries the
            # submission's random token): the same run meets the same failures every time
            elif self._refused(ln["body"]) is not None:
                err.append({"id": rid, "custom_id": ln["custom_id"], "error": None,
                            "response": {"status_code": 400, "request_id": rid, "body": self._refused(ln["body"])}})
                outcome = "refused"
            elif random.Random(_h(self.seed, b["ordinal"], body_hash(ln["body"]))).randrange(100) < self.fail_pct:
                err.append({"id": rid, "custom_id": ln["custom_id"], "error": None,
                            "response": {"status_code": 500, "request_id": rid,
                                         "body": {"error": {"message": "server error", "type": "server_error"}}}})
                outcome = "error"
            else:
                out.append({"id": rid, "custom_id": ln["custom_id"], "error": None,
                            "response": {"status_code": 200, "request_id": rid, "body": self._completion(ln["body"])}})
                outcome = "ok"
            self.lines.append((o["id"], ln["custom_id"], body_hash(ln["body"]), outcome))
        random.Random(_h(self.seed, o["id"])).shuffle(out)  # lines are not in input order
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                fid = f"file-out-{o['id']}-{name[:3]}"
                data = b"".join((json.dumps(r) + "\n").encode() for r in rows)
                self.files[fid] = {"obj": {"id": fid, "object": "file", "bytes": len(data), "created_at": 0,
                                           "filename": f"{name}.jsonl", "purpose": "batch_output",
                                           "status": "processed"}, "data": data}
                o[name] = fid
        o["request_counts"].update(completed=len(out), failed=len(err))
        o["status"] = "expired" if expire else "completed"

    # ------------------------------------------------------------------ Anthropic message batches
    def _mcreate(self, h):
        req = json.loads(h._body())
        now = time.time()
        with self._lock:
            bid = f"msgbatch_{len(self.order) + 1:06d}"
            self.order.append(bid)
            obj = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                   "request_counts": {"processing": len(req["requests"]), "succeeded": 0, "errored": 0,
                                      "canceled": 0, "expired": 0},
                   "created_at": _iso(now), "expires_at": _iso(now + 86400), "ended_at": None,
                   "cancel_initiated_at": None, "archived_at": None, "results_url": None}
            self.mbatches[bid] = {"obj": obj, "polls": 0, "ordinal": len(self.order), "requests": req["requests"]}
        self._count("create")
        self._hold("create")
        return h._json(200, obj)

    def _mretrieve(self, h, bid):
        b = self.mbatches[bid]
        self._count("poll")
        with self._lock:
            o = b["obj"]
            if o["processing_status"] != "ended":
                b["polls"] += 1
                if b["polls"] >= self.polls_to_finish:
                    self._mfinish(b)
        return h._json(200, b["obj"])

    def _mfinish(self, b):
        o = b["obj"]
        expire = b["ordinal"] in self.expire_batches
        rows, rc = [], dict(processing=0, succeeded=0, errored=0, canceled=0, expired=0)
        for i, r in enumerate(b["requests"]):
            p = r["params"]
            if expire and i % 2:
                res, outcome = {"type": "expired"}, "expired"
            elif random.Random(_h(self.seed, b["ordinal"], body_hash(p))).randrange(100) < self.fail_pct:
                res = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error",
                                                                               "message": "Internal server error"}}}
                outcome = "errored"
            else:
                msgs = ([{"role": "system", "content": p["system"]}] if p.get("system") else []) + p["messages"]
                text = batch_answer(msgs, None, 0, self.invalid_pct)
                res = {"type": "succeeded", "message": {
                    "id": f"msg_{i}", "type": "message", "role": "assistant", "model": p["model"],
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": 10 if self.prompt_tokens is None else self.prompt_tokens(msgs),
                              "output_tokens": 2}}}
                outcome = "succeeded"
            rc[outcome] += 1
            rows.append({"custom_id": r["custom_id"], "result": res})
            self.lines.append((o["id"], r["custom_id"], body_hash(p), outcome))
        random.Random(_h(self.seed, o["id"])).shuffle(rows)
        b["results"] = b"".join((json.dumps(r) + "\n").encode() for r in rows)
        o.update(processing_status="ended", request_counts=rc, ended_at=_iso(time.time()),
                 results_url=f"{self.anthropic_url}/v1/messages/batches/{o['id']}/results")

    # ------------------------------------------------------------------ what a test counts
    def submitted_twice(self) -> int:
        """Request bodies that were in a batch again after one had answered them (0 expected)."""
        answered, twice = set(), 0
        by_batch = {}
        for bid, _cid, bh, outcome in self.lines:
            by_batch.setdefault(bid, []).append((bh, outcome))
        for bid in self.order:
            for bh, outcome in by_batch.get(bid, []):
                if bh in answered:
                    twice += 1
                if outcome in ("ok", "succeeded"):
                    answered.add(bh)
        return twice
