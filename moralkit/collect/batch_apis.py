"""The two providers' batch APIs behind one small interface, for :class:`moralkit.collect.batch.BatchBackend`.

- **OpenAI's Batch API** (:class:`OpenAIBatches`): the requests are uploaded as a JSONL file
  (``POST /v1/files``, ``purpose=batch``; one line ``{custom_id, method: "POST", url:
  "/v1/chat/completions", body}``), a batch is created on it (``POST /v1/batches`` with
  ``input_file_id``, ``endpoint``, ``completion_window: "24h"``, ``metadata``) and polled
  (``GET /v1/batches/{id}``: ``validating`` → ``in_progress`` → ``finalizing`` → ``completed``, or
  ``failed`` / ``expired`` / ``cancelling`` → ``cancelled``). The results are the ``output_file_id``
  and ``error_file_id`` files, one JSONL line per request in any order, matched by ``custom_id``.
  (https://platform.openai.com/docs/guides/batch, https://platform.openai.com/docs/api-reference/batch)
- **Anthropic's Message Batches** (:class:`AnthropicBatches`): ``POST /v1/messages/batches`` with
  ``requests: [{custom_id, params}]``, polled at ``GET /v1/messages/batches/{id}``
  (``processing_status`` ``in_progress`` / ``canceling`` / ``ended``; ``request_counts`` processing,
  succeeded, errored, canceled, expired), results as JSONL from ``results_url``: ``{custom_id, result:
  {type: succeeded | errored | canceled | expired, ...}}`` in any order.
  (https://docs.anthropic.com/en/api/creating-message-batches,
  https://docs.anthropic.com/en/api/retrieving-message-batches, https://docs.anthropic.com/en/docs/build-with-claude/batch-processing)

The interface, through the official ``openai`` / ``anthropic`` clients: ``kind``, ``api`` (the response
cache's API name), ``ended`` (statuses after which nothing changes); ``body(request)`` and
``line(custom_id, body)`` (one input line, the online backend's request body); ``find_file`` / ``upload``
(OpenAI's file stage; Anthropic has none); ``find_batch`` / ``create``; ``poll(batch_id)`` (status, counts,
creation time, errors); ``download(ended)`` (the result files' bytes); ``outcomes(blobs, n_of)``
(``custom_id -> (texts, reasons, meta, error, status_code)``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import MoralkitError
from .backends import MalformedResponse
from .cache import ANTHROPIC_API, OPENAI_API
from .units import choices_from_json

__all__ = ["OpenAIBatches", "AnthropicBatches", "OPENAI_ENDED", "ANTHROPIC_ENDED", "MAX_REQUESTS", "MAX_BYTES",
           "CLOCK_SLACK_S"]

#: OpenAI batch statuses after which nothing changes (https://platform.openai.com/docs/guides/batch).
OPENAI_ENDED = ("completed", "failed", "expired", "cancelled")
ANTHROPIC_ENDED = ("ended",)
#: Requests per submission: OpenAI takes up to 50,000 requests and 200 MB per batch input file;
#: Anthropic up to 100,000 requests or 256 MB per batch (the batch-processing guides).
MAX_REQUESTS = {"openai": 50_000, "anthropic": 100_000}
MAX_BYTES = {"openai": 190_000_000, "anthropic": 240_000_000}
#: An Anthropic batch created up to this long before its intent was written is still a candidate.
CLOCK_SLACK_S = 300.0

class OpenAIBatches:
    """OpenAI's files + batches, through the official ``openai`` client."""

    kind = "openai"
    api = OPENAI_API
    ended = OPENAI_ENDED

    def __init__(self, online, base_url, key, timeout):
        import openai

        self.online = online  # the online backend: a batch line is the body it would send
        self.base_url = base_url
        self.client = openai.OpenAI(api_key=key or "EMPTY", base_url=base_url, timeout=timeout, max_retries=3)

    def body(self, req) -> dict:
        return self.online.request_body(req)

    def line(self, cid, body) -> dict:
        return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}

    @staticmethod
    def filename(sub) -> str:
        return f"moralkit-{sub}.jsonl"

    def find_file(self, sub):
        # GET /v1/files?purpose=batch (https://platform.openai.com/docs/api-reference/files/list)
        for f in self.client.files.list(purpose="batch"):
            if f.filename == self.filename(sub):
                return f.id
        return None

    def upload(self, sub, data: bytes) -> str:
        # POST /v1/files, purpose "batch" (https://platform.openai.com/docs/api-reference/files/create)
        return self.client.files.create(file=(self.filename(sub), data, "application/jsonl"), purpose="batch").id

    def find_batch(self, sub, st, known):
        # GET /v1/batches; our batches carry metadata.moralkit_submission
        for b in self.client.batches.list(limit=100):
            if (b.metadata or {}).get("moralkit_submission") == sub:
                return b.id
        return None

    def create(self, sub, st, run_name) -> str:
        b = self.client.with_options(max_retries=0).batches.create(input_file_id=st["file_id"], endpoint="/v1/chat/completions",
                                       completion_window="24h",
                                       metadata={"moralkit_submission": sub, "moralkit_run": run_name[:500]})
        return b.id

    def poll(self, batch_id) -> dict:
        b = self.client.batches.retrieve(batch_id)
        rc = b.request_counts
        counts = dict(total=rc.total, completed=rc.completed, failed=rc.failed) if rc is not None else {}
        errors = [f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}" for e in ((b.errors.data or []) if b.errors
                                                                                     else [])]
        return dict(status=b.status, counts=counts, output_file_id=b.output_file_id, error_file_id=b.error_file_id,
                    created_at=b.created_at, errors=errors)

    def download(self, ended) -> list[bytes]:
        out = []
        for fid in (ended.get("output_file_id"), ended.get("error_file_id")):
            if fid:
                out.append(self.client.files.content(fid).content)
        return out

    @staticmethod
    def outcomes(blobs, n_of):
        """``custom_id -> (texts, reasons, meta, error, status_code)`` of the result lines."""
        res = {}
        for blob in blobs:
            for line in blob.splitlines():
                if not line.strip():
                    continue
                d = json.loads(line)
                cid = d.get("custom_id")
                resp = d.get("response") or {}
                err = d.get("error")
                code = resp.get("status_code")
                if err or code != 200:
                    body = resp.get("body") if isinstance(resp.get("body"), dict) else {}
                    e = err or body.get("error") or {}
                    msg = f"HTTP {code} " if code else ""
                    msg += f"{e.get('code') or e.get('type') or 'error'}: {e.get('message', '')}".strip()
                    res[cid] = (None, None, None, f"BatchRequestError {msg}", code)
                    continue
                try:
                    texts, reasons, meta = choices_from_json(resp.get("body"), n_of(cid))
                    res[cid] = (texts, reasons, meta, None, None)
                except MalformedResponse as e:
                    res[cid] = (None, None, None, f"MalformedResponse: {e}", 200)
        return res


class AnthropicBatches:
    """Anthropic's Message Batches, through the official ``anthropic`` client."""

    kind = "anthropic"
    api = ANTHROPIC_API
    ended = ANTHROPIC_ENDED

    def __init__(self, online, base_url, key, timeout):
        import anthropic

        self.online = online  # the online backend: a batch request's params are the body it would send
        self.base_url = base_url
        self.client = anthropic.Anthropic(api_key=key or "EMPTY", base_url=base_url, timeout=timeout, max_retries=3)

    def body(self, req) -> dict:
        # https://docs.anthropic.com/en/api/messages: the Messages API has no n
        if req.extra_body and req.extra_body.get("n", 1) != 1:
            raise MoralkitError("Anthropic's Messages API has no n: use --samples-per-request 1 with "
                                "--backend anthropic")
        return self.online.request_body(req)

    def line(self, cid, body) -> dict:
        return {"custom_id": cid, "params": body}

    def find_file(self, sub):
        return "none"  # no file stage: the requests go with the batch

    def upload(self, sub, data):  # pragma: no cover - never called (find_file answers)
        return "none"

    def find_batch(self, sub, st, known):
        """A batch created around the intent's time with as many requests, not recorded by any submission.

        Message batches carry no metadata; the candidate is checked against the custom_ids when its
        results come (:meth:`BatchBackend._merge`).
        """
        t_intent = st["intent"]["unix"]
        n = len(st["intent"]["requests"])
        for b in self.client.messages.batches.list(limit=100):
            created = b.created_at.timestamp()
            if created < t_intent - CLOCK_SLACK_S:
                break  # newest first
            rc = b.request_counts
            total = rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired
            if total == n and b.id not in known and b.id not in st["foreign"]:
                return b.id
        return None

    def create(self, sub, st, run_name) -> str:
        reqs = [json.loads(line) for line in Path(st["input_path"]).read_bytes().splitlines() if line.strip()]
        return self.client.with_options(max_retries=0).messages.batches.create(requests=reqs).id

    def poll(self, batch_id) -> dict:
        b = self.client.messages.batches.retrieve(batch_id)
        rc = b.request_counts
        counts = dict(processing=rc.processing, succeeded=rc.succeeded, errored=rc.errored, canceled=rc.canceled,
                      expired=rc.expired)
        return dict(status=b.processing_status, counts=counts, created_at=b.created_at.timestamp(), errors=[])

    def download(self, ended) -> list[bytes]:
        return [b"".join((r.model_dump_json() + "\n").encode() for r in
                         self.client.messages.batches.results(ended["batch_id"]))]

    @staticmethod
    def outcomes(blobs, n_of):
        res = {}
        for blob in blobs:
            for line in blob.splitlines():
                if not line.strip():
                    continue
                d = json.loads(line)
                cid, r = d.get("custom_id"), d.get("result") or {}
                typ = r.get("type")
                if typ == "succeeded":
                    m = r.get("message") or {}
                    text = "".join(c.get("text", "") for c in (m.get("content") or []) if c.get("type") == "text")
                    u = m.get("usage") or {}
                    meta = dict(prompt_tokens=u.get("input_tokens"), completion_tokens=u.get("output_tokens"),
                                model=m.get("model"))
                    res[cid] = ([text], [m.get("stop_reason")], meta, None, None)
                elif typ == "errored":
                    e = (r.get("error") or {}).get("error") or r.get("error") or {}
                    res[cid] = (None, None, None, f"BatchRequestError errored: {e.get('type', '')} {e.get('message', '')}"
                                .strip(), None)
                else:  # canceled, expired
                    res[cid] = (None, None, None, f"BatchRequestError {typ}: the batch ended before this request ran",
                                None)
        return res

