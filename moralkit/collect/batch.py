"""Collecting through the providers' batch APIs (about half the price), resumable at any moment.

``--batch`` on ``collect psm`` / ``collect moralchoice`` sends the survey's requests through

- **OpenAI's Batch API** (``--backend openai``): the requests are uploaded as a JSONL file
  (``POST /v1/files``, ``purpose=batch``; one line ``{custom_id, method: "POST", url:
  "/v1/chat/completions", body}``), a batch is created on it (``POST /v1/batches`` with
  ``input_file_id``, ``endpoint``, ``completion_window: "24h"``, ``metadata``) and polled
  (``GET /v1/batches/{id}``: ``validating`` → ``in_progress`` → ``finalizing`` → ``completed``, or
  ``failed`` / ``expired`` / ``cancelling`` → ``cancelled``). The results are the ``output_file_id``
  and ``error_file_id`` files, one JSONL line per request in any order, matched by ``custom_id``.
  (https://platform.openai.com/docs/guides/batch, https://platform.openai.com/docs/api-reference/batch)
- **Anthropic's Message Batches** (``--backend anthropic``): ``POST /v1/messages/batches`` with
  ``requests: [{custom_id, params}]``, polled at ``GET /v1/messages/batches/{id}``
  (``processing_status`` ``in_progress`` / ``canceling`` / ``ended``; ``request_counts`` processing,
  succeeded, errored, canceled, expired), results as JSONL from ``results_url``: ``{custom_id, result:
  {type: succeeded | errored | canceled | expired, ...}}`` in any order.
  (https://docs.anthropic.com/en/api/creating-message-batches,
  https://docs.anthropic.com/en/api/retrieving-message-batches, https://docs.anthropic.com/en/docs/build-with-claude/batch-processing)

What a run directory records, and why a kill at any moment loses nothing and sends nothing twice
(``batches.jsonl``, one fsynced line per event, in the run's lock):

1. ``batches/<sub>.input.jsonl`` (the exact request lines, written atomically), then an ``intent``
   event: the submission's token ``<sub>``, its ``custom_id`` → ``(task, attempt)`` slots and seeds,
   *before* anything is uploaded;
2. ``file``: the uploaded file's id (OpenAI; the file is named ``moralkit-<sub>.jsonl``);
3. ``batch``: the batch's id (OpenAI batches carry ``metadata.moralkit_submission = <sub>``;
   Anthropic's ``custom_id`` s start with ``<sub>``);
4. ``ended``: the final status and counts; the result files are saved under ``batches/``;
5. ``merged``: every result is in ``records.jsonl``.

On resume, a submission with an intent but no file id looks for its file by name; one with no
batch id looks for its batch by metadata (OpenAI) or by creation time and size, checked against
its ``custom_id`` s when the results come (Anthropic, whose batches have no metadata). Only if none
exists is the same input sent. Merging is idempotent (a ``(task, attempt)`` already stored is
skipped), so a kill while merging only repeats the merge. Requests that failed or expired are
recorded as ``error`` records and sent again, with the same attempt and seed, in the next
submission; invalid answers (the PSM's up to 3 attempts) go into the next submission as their next
attempt. The records are the online runner's (:mod:`moralkit.collect.runner`), with
``batch_submission``, ``batch_id`` and ``custom_id`` added, so exports do not depend on the mode.

While waiting, a status line (state, counts, age) goes to stderr. Ctrl-C or ``--wait SECONDS``
stops waiting: :class:`BatchPendingError` (exit status 3) names the batches and the command that
resumes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets as _secrets
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

from ..atomicfile import atomic_write_bytes
from ..errors import MoralkitError
from .backends import Backend, MalformedResponse
from .cache import (
    ANTHROPIC_API,
    DEFAULT_ANTHROPIC_URL,
    DEFAULT_OPENAI_URL,
    OPENAI_API,
    ResponseCache,
)
from .runner import STOP, CollectionIncompleteError, RunReport, run_tasks
from .store import session_info
from .units import (
    Unit,
    build_units,
    choices_from_json,
    finish_report,
    run_grouped_online,
    store_result,
    task_done,
)

__all__ = ["BatchBackend", "BatchPendingError", "Journal", "run_requests", "batch_state", "OPENAI_ENDED", "ANTHROPIC_ENDED",
           "JOURNAL"]

JOURNAL = "batches.jsonl"
BATCH_DIR = "batches"
#: OpenAI batch statuses after which nothing changes (https://platform.openai.com/docs/guides/batch).
OPENAI_ENDED = ("completed", "failed", "expired", "cancelled")
ANTHROPIC_ENDED = ("ended",)
#: Requests per submission: OpenAI takes up to 50,000 requests and 200 MB per batch input file;
#: Anthropic up to 100,000 requests or 256 MB per batch (the batch-processing guides).
MAX_REQUESTS = {"openai": 50_000, "anthropic": 100_000}
MAX_BYTES = {"openai": 190_000_000, "anthropic": 240_000_000}
#: An Anthropic batch created up to this long before its intent was written is still a candidate.
CLOCK_SLACK_S = 300.0


class BatchPendingError(CollectionIncompleteError):
    """Batches are still running and the collector stopped waiting (Ctrl-C or ``--wait``): exit status 3.

    Everything submitted is recorded in ``batches.jsonl``; the message names the batches and the command
    that resumes (it polls them, merges their results and sends only what is left).
    """

    def __init__(self, report, states, run_dir, command):
        self.report = report
        self.states = states
        lines = "; ".join(states) or "none"
        MoralkitError.__init__(
            self, f"stopped waiting for {len(states)} batch(es) ({lines}). Every submitted request is recorded in "
                  f"{Path(run_dir) / JOURNAL}: nothing is lost and nothing will be sent twice. Resume with: {command}")


def _fsync_append(path: Path, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """The run's batch journal (``batches.jsonl``): submissions and what became of them.

    A torn last line (a kill mid-write) is cut on open: every event is written *before* the
    action it announces is known to be safe to forget (an intent before the upload) or *after*
    the action it records (a file or batch id), and a lost id is found again by listing.
    """

    def __init__(self, run_dir):
        self.dir = Path(run_dir)
        self.path = self.dir / JOURNAL
        self.files = self.dir / BATCH_DIR
        self.files.mkdir(parents=True, exist_ok=True)
        self.events: list[dict] = []
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                with open(self.path, "rb+") as f:
                    f.truncate(cut)
                    os.fsync(f.fileno())
                data = data[:cut]
            for i, line in enumerate(data.split(b"\n")[:-1], 1):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    raise MoralkitError(f"{self.path}, line {i}: not a journal event; the batches it names are "
                                        "listed in the lines around it (do not delete the file)") from None

    def append(self, event: dict) -> None:
        event = dict(event, at=_now())
        _fsync_append(self.path, (json.dumps(event, ensure_ascii=True) + "\n").encode())
        self.events.append(event)

    def submissions(self) -> dict:
        """``sub -> state`` (``intent``, ``file_id``, ``batch_id``, ``ended``, ``merged``, ``foreign``)."""
        subs: dict = {}
        for e in self.events:
            s = e.get("sub")
            if e["event"] == "intent":
                subs[s] = dict(intent=e, file_id=None, batch_id=None, ended=None, merged=False, foreign=set())
            elif s in subs:
                st = subs[s]
                if e["event"] == "file":
                    st["file_id"] = e["file_id"]
                elif e["event"] == "batch":
                    st["batch_id"] = e["batch_id"]
                elif e["event"] == "ended":
                    st["ended"] = e
                elif e["event"] == "merged":
                    st["merged"] = True
                elif e["event"] == "foreign":  # a batch adopted by mistake (not ours): look again
                    st["foreign"].add(e["batch_id"])
                    st["batch_id"] = None
                    st["ended"] = None
        return subs

    def known_batch_ids(self) -> set:
        return {e["batch_id"] for e in self.events if e["event"] == "batch"}


def batch_state(run_dir) -> dict:
    """What the batch journal of ``run_dir`` says, read only: ``submissions``, ``open`` (submitted, not
    merged), ``requests_open``, ``ids`` of the open batches, and ``text``, a one-line summary for a status
    table (empty when the run has no journal)."""
    path = Path(run_dir) / JOURNAL
    out = dict(submissions=0, open=0, requests_open=0, ids=[], text="")
    if not path.exists():
        return out
    subs: dict = {}
    for line in path.read_bytes().split(b"\n")[:-1]:  # a torn last line is not an event yet
        try:
            e = json.loads(line)
        except ValueError:
            continue
        s = e.get("sub")
        if e.get("event") == "intent":
            subs[s] = dict(n=len(e.get("requests", [])), unix=e.get("unix", 0), batch=None, ended=None, merged=False)
        elif s in subs:
            if e["event"] == "batch":
                subs[s]["batch"] = e["batch_id"]
            elif e["event"] == "ended":
                subs[s]["ended"] = e.get("status")
            elif e["event"] == "merged":
                subs[s]["merged"] = True
            elif e["event"] == "foreign":
                subs[s]["batch"] = None
    opened = [v for v in subs.values() if not v["merged"]]
    out.update(submissions=len(subs), open=len(opened), requests_open=sum(v["n"] for v in opened),
               ids=[v["batch"] for v in opened if v["batch"]])
    parts = [f"{len(subs)} submitted"]
    for v in opened[:3]:
        st = "ended, not merged" if v["ended"] else ("running" if v["batch"] else "not uploaded")
        parts.append(f"{v['batch'] or 'pending'}: {st}, {v['n']} requests, age {_age(time.time() - v['unix'])}")
    if len(opened) > 3:
        parts.append(f"... {len(opened) - 3} more open")
    if not opened:
        parts.append("all merged")
    out["text"] = "; ".join(parts)
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _age(seconds: float) -> str:
    s = int(max(0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# --------------------------------------------------------------------------- the two APIs


class _OpenAIBatches:
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


class _AnthropicBatches:
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


# --------------------------------------------------------------------------- the backend


class BatchBackend(Backend):
    """Run whole collections through a batch API (see the module docstring).

    Parameters
    ----------
    provider : {"openai", "anthropic"}
    model : str
        The model name at the provider.
    base_url : str, optional
        Endpoint (default the provider's); credentials in it are never recorded.
    api_key_env : str, optional
        Name of the environment variable holding the key (default ``OPENAI_API_KEY`` /
        ``ANTHROPIC_API_KEY``); the key is never written.
    label : str, optional
        Respondent label (default ``model``).
    wait : float, optional
        Stop waiting after this many seconds (:class:`BatchPendingError`, exit status 3); ``None`` waits
        until every batch has ended, ``0`` submits and returns at once.
    poll_interval : float, default 30
        Seconds between polls of a running batch.
    max_retries : int, default 3
        Submissions of one request whose result was an error (failed, expired, canceled) before it is
        left undone for the session.
    cache : ResponseCache, optional
        Answers found there are not submitted; answers received are stored there.
    send_seed : bool, default True
        OpenAI only: send each request's seed (Anthropic has none).
    status : file, optional
        Where the status line goes (default ``sys.stderr``; ``None`` for nothing).
    options : dict, optional
        Options of the online backend whose request bodies the batch lines are (e.g. ``max_tokens_param``,
        ``reasoning``, ``api_version``); a sweep file's ``options``.
    """

    def __init__(self, provider, model, base_url=None, api_key_env=None, label=None, wait=None, poll_interval=30.0,
                 max_retries=3, cache: ResponseCache | None = None, send_seed=True, timeout=120.0,
                 status="stderr", max_requests=None, options=None):
        from .secrets import check_env_name, strip_url

        if provider not in ("openai", "anthropic"):
            raise MoralkitError(f"--batch works with --backend openai or anthropic, not {provider!r}")
        if not model:
            raise MoralkitError("a batch collection needs --model (the provider's model name)")
        if wait is not None and not float(wait) >= 0:
            raise MoralkitError(f"--wait must be >= 0 seconds, got {wait}")
        if not float(poll_interval) > 0:
            raise MoralkitError(f"--poll-interval must be > 0 seconds, got {poll_interval}")
        self.name = provider
        self.remote_model = str(model)
        self.model = label or str(model)
        self.api_key_env = check_env_name(api_key_env or ("OPENAI_API_KEY" if provider == "openai"
                                                          else "ANTHROPIC_API_KEY"))
        key = os.environ.get(self.api_key_env)
        if not key and base_url is None:
            raise MoralkitError(f"no API key: set the environment variable {self.api_key_env}")
        self._base_url = base_url
        self.base_url = strip_url(base_url) if base_url else (DEFAULT_OPENAI_URL if provider == "openai"
                                                             else DEFAULT_ANTHROPIC_URL)
        self.wait = None if wait is None else float(wait)
        self.poll_interval = float(poll_interval)
        self.max_retries = int(max_retries)
        self.cache = cache
        self.max_requests = int(max_requests or MAX_REQUESTS[provider])
        self.status = sys.stderr if status == "stderr" else status
        cls = _OpenAIBatches if provider == "openai" else _AnthropicBatches
        from .backends import make_backend

        online = dict(send_seed=send_seed) if provider == "openai" else {}
        online.update(options or {})  # the online backend's options (max_tokens_param, reasoning, api_version)
        self.online = make_backend(provider, self.remote_model, base_url=base_url, api_key_env=self.api_key_env,
                                   **online)
        self.api = cls(self.online, base_url, key, timeout)
        self.sent = 0  # requests submitted in this object's life
        self.submissions = 0
        self._fresh: set = set()  # submissions whose intent this process wrote (nothing to find by listing)

    @property
    def reasoning(self) -> bool:
        """Whether the model is a reasoning model (its online backend's judgement): its output budget."""
        return bool(getattr(self.online, "reasoning", False))

    def check_sampling(self, sampling) -> None:
        """Refuse, before anything is sent, what the online backend would refuse."""
        check = getattr(self.online, "check_sampling", None)
        if check is not None:
            check(sampling)

    def secrets(self) -> list[str]:
        from .secrets import url_secrets

        key = os.environ.get(self.api_key_env)
        return ([key] if key else []) + url_secrets(self._base_url)

    def info(self) -> dict:
        import importlib.metadata as md

        try:
            v = md.version(self.name)
        except md.PackageNotFoundError:  # pragma: no cover
            v = None
        return {"backend": self.name, "mode": "batch", "model": self.model, "remote_model": self.remote_model,
                "base_url": self.base_url, "api_key_env": self.api_key_env, self.name: v,
                "response_cache": str(self.cache.path) if self.cache else None}

    def generate(self, requests):
        raise MoralkitError("a batch backend runs whole collections (run_psm / run_moralchoice), not single requests")

    # ------------------------------------------------------------------ one collection phase
    def run_tasks(self, store, tasks, parse, *, seed, sampling, max_attempts=1, common=None, bar=None,
                  record_batch=False, groups=None, **_):
        """Send ``tasks`` through batches until each is done; the same contract as
        :func:`moralkit.collect.runner.run_tasks` (records, resume, :class:`RunReport`)."""
        for s in self.secrets():
            store.redact.add(s)
        common = dict(common or {})
        J = Journal(store.dir)
        by_id = {t.task: t for t in tasks}
        rep = RunReport()
        failed: dict = {}
        errors_this_session: Counter = Counter()
        t0 = time.perf_counter()
        deadline = None if self.wait is None else time.monotonic() + self.wait
        self._bar_done = sum(task_done(store, t, max_attempts) for t in tasks)
        if bar is not None:
            bar.update(self._bar_done)
        kw = dict(seed=seed, sampling=sampling, max_attempts=max_attempts, groups=groups)
        self._sampling = sampling
        try:
            while True:
                subs = self._mine(J, by_id)
                held = {tuple(s) for st in subs.values() if not st["merged"] for r in st["intent"]["requests"]
                        for s in r["slots"]}
                give_up = {t for t, n in errors_this_session.items() if n > self.max_retries}
                units = build_units(store, tasks, exclude=held, skip=give_up, **kw)
                if self.cache is not None and units:
                    units = self._from_cache(store, units, parse, common, record_batch, rep)
                    if units is None:
                        continue  # answers came from the cache: the next attempts may be due
                if units:
                    self._submit(J, store, units, by_id)
                    rep.sent += len(units)
                open_subs = {s: st for s, st in self._mine(J, by_id).items() if not st["merged"]}
                if not open_subs:
                    break
                self._wait_and_merge(J, store, open_subs, by_id, parse, common, record_batch, rep, failed,
                                     errors_this_session, deadline, bar, tasks, max_attempts)
        except KeyboardInterrupt:
            self._pending(J, by_id, store, rep, tasks, max_attempts, failed)
        finally:
            rep.wall_seconds = time.perf_counter() - t0
        finish_report(store, tasks, max_attempts, rep, failed)
        return rep

    def _mine(self, J, by_id):
        """The submissions whose requests all belong to this phase's tasks."""
        return {s: st for s, st in J.submissions().items()
                if all(sl[0] in by_id for r in st["intent"]["requests"] for sl in r["slots"])}

    def _from_cache(self, store, units, parse, common, record_batch, rep):
        left, served = [], 0
        for u in units:
            body = self.api.body(u.request)
            hit = self.cache.get(self.cache.key(self.api.api, self.base_url, body, u.request.seed))
            if hit is None or len(hit["texts"]) < u.n:
                left.append(u)
                continue
            extra = dict(cached=hit["created"])
            if record_batch:
                extra["batch"] = 1
            a, _ = store_result(store, u, parse, common=common, texts=hit["texts"], reasons=hit.get("reasons"),
                                meta=hit.get("meta"), started=time.time(), latency_s=0.0, extra=extra)
            rep.attempts += a
            served += 1
        return left if not served else None

    # ------------------------------------------------------------------ submitting
    def _submit(self, J, store, units, by_id):
        chunks, cur, size = [], [], 0
        for u in units:
            b = len(json.dumps(self.api.body(u.request))) + 200
            if cur and (len(cur) >= self.max_requests or size + b > MAX_BYTES[self.name]):
                chunks.append(cur)
                cur, size = [], 0
            cur.append(u)
            size += b
        if cur:
            chunks.append(cur)
        for chunk in chunks:
            sub = _secrets.token_hex(6)
            lines, reqs = [], []
            for i, u in enumerate(chunk):
                cid = f"{sub}-{i}"
                lines.append(json.dumps(self.api.line(cid, self.api.body(u.request)), ensure_ascii=False))
                reqs.append(dict(custom_id=cid, key=u.key, attempt=u.attempt, seed=u.request.seed, n=u.n,
                                 slots=[list(s) for s in u.slots()]))
            data = ("\n".join(lines) + "\n").encode()
            path = J.files / f"{sub}.input.jsonl"
            atomic_write_bytes(path, data)
            # the intent is durable before anything leaves the machine
            J.append(dict(event="intent", sub=sub, provider=self.name, base_url=self.base_url,
                          model=self.remote_model, unix=time.time(), input=path.name,
                          sha256=hashlib.sha256(data).hexdigest(), requests=reqs))
            self.submissions += 1
            self.sent += len(chunk)
            self._fresh.add(sub)
            self._ensure_submitted(J, sub, J.submissions()[sub], store)

    def _ensure_submitted(self, J, sub, st, store):
        """Upload and create what a submission still lacks, finding what a killed session had created."""
        st = J.submissions()[sub]  # the journal's state, never a stale copy
        st = dict(st, input_path=str(J.files / st["intent"]["input"]))
        fresh = sub in self._fresh
        if st["file_id"] is None:
            fid = None if fresh and self.name == "openai" else self.api.find_file(sub)
            if fid is None:
                fid = self.api.upload(sub, Path(st["input_path"]).read_bytes())
            J.append(dict(event="file", sub=sub, file_id=fid))
            st["file_id"] = fid
        if st["batch_id"] is None:
            known = J.known_batch_ids()
            bid = None if fresh else self.api.find_batch(sub, st, known)
            if bid is None:
                try:
                    bid = self.api.create(sub, st, store.dir.name)
                except Exception:  # the batch may exist although its answer was lost: never create it twice
                    bid = self.api.find_batch(sub, st, known)
                    if bid is None:
                        raise
            J.append(dict(event="batch", sub=sub, batch_id=bid))
            st["batch_id"] = bid
        return st["batch_id"]

    # ------------------------------------------------------------------ waiting and merging
    def _status_line(self, sub, st, p, first=False):
        if self.status is None:
            return
        c = p["counts"]
        if self.name == "openai":
            cnt = f"{c.get('completed', 0)}/{c.get('total', 0)} done, {c.get('failed', 0)} failed"
        else:
            cnt = (f"{c.get('succeeded', 0)} succeeded, {c.get('errored', 0)} errored, {c.get('expired', 0)} expired, "
                   f"{c.get('canceled', 0)} canceled, {c.get('processing', 0)} processing")
        age = _age(time.time() - (p.get("created_at") or st["intent"]["unix"]))
        print(f"[batch] {self.name} {st['batch_id']}: {p['status']}, {cnt}, age {age}", file=self.status, flush=True)

    def _wait_and_merge(self, J, store, open_subs, by_id, parse, common, record_batch, rep, failed, errs, deadline,
                        bar, tasks, max_attempts):
        last = {}
        pending = dict(open_subs)
        while pending:
            for sub in list(pending):
                st = pending[sub]
                if st["ended"] is None:
                    self._ensure_submitted(J, sub, st, store)
                    st = pending[sub] = J.submissions()[sub]
                    p = self.api.poll(st["batch_id"])
                    sig = (p["status"], json.dumps(p["counts"], sort_keys=True))
                    if last.get(sub, (None, 0))[0] != sig or time.monotonic() - last[sub][1] > 60:
                        self._status_line(sub, st, p)
                        last[sub] = (sig, time.monotonic())
                    if p["status"] not in self.api.ended:
                        continue
                    blobs = self.api.download(dict(p, batch_id=st["batch_id"])) if p["status"] != "failed" else []
                    names = []
                    for k, blob in enumerate(blobs):
                        name = f"{sub}.{st['batch_id'][:40]}.result{k}.jsonl"
                        atomic_write_bytes(J.files / name, blob)
                        names.append(name)
                    J.append(dict(event="ended", sub=sub, batch_id=st["batch_id"], status=p["status"],
                                  counts=p["counts"], errors=p.get("errors", []), results=names,
                                  created_at=p.get("created_at")))
                    st = pending[sub] = J.submissions()[sub]
                if self._merge(J, store, sub, st, by_id, parse, common, record_batch, rep, failed, errs):
                    del pending[sub]
                else:  # not our batch after all: find or create ours
                    pending[sub] = J.submissions()[sub]
                if bar is not None:
                    done = sum(task_done(store, t, max_attempts) for t in tasks)
                    bar.update(done - self._bar_done)
                    self._bar_done = done
            if not pending:
                return
            if (deadline is not None and time.monotonic() >= deadline) or STOP.is_set():
                self._pending(J, by_id, store, rep, tasks, max_attempts, failed)
            end = time.monotonic() + (self.poll_interval if deadline is None
                                      else max(0.0, min(self.poll_interval, deadline - time.monotonic())))
            while time.monotonic() < end and not STOP.is_set():  # a stop signal (SIGINT, SIGTERM) ends the wait
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))

    def _merge(self, J, store, sub, st, by_id, parse, common, record_batch, rep, failed, errs) -> bool:
        """Store the results of an ended submission (idempotent). False: the batch was not ours."""
        ended = st["ended"]
        reqs = st["intent"]["requests"]
        blobs = [(J.files / n).read_bytes() for n in ended.get("results", [])]
        n_of = {r["custom_id"]: r["n"] for r in reqs}
        out = self.api.outcomes(blobs, lambda cid: n_of.get(cid, 1))
        if self.name == "anthropic" and any(cid not in n_of for cid in out):
            # a batch adopted by time and size that turns out to be someone else's: look again
            J.append(dict(event="foreign", sub=sub, batch_id=st["batch_id"]))
            return False
        t_sub = st["intent"]["unix"]
        latency = max(0.0, time.time() - t_sub)
        already = {(r["task"], int(r["attempt"])) for r in store.records
                   if r.get("kind") == "error" and r.get("batch_submission") == sub}
        batch_msg = "; ".join(ended.get("errors") or []) or f"the batch ended {ended['status']}"
        for r in reqs:
            u = Unit(r["key"], [by_id[s[0]] for s in r["slots"]], int(r["attempt"]), _request_of(r, by_id, self))
            texts, reasons, meta, err, code = out.get(r["custom_id"], (None, None, None, None, None))
            if texts is None and err is None:
                err = f"BatchRequestError not in the results ({batch_msg})"
            extra = dict(batch_submission=sub, batch_id=st["batch_id"], custom_id=r["custom_id"])
            if record_batch:
                extra["batch"] = len(reqs)
            a, e = store_result(store, u, parse, common=common, texts=texts, reasons=reasons, meta=meta, error=err,
                                status_code=code, started=t_sub, latency_s=latency, extra=extra, skip_errors=already)
            rep.attempts += a
            rep.errors += e
            if err is not None:
                rep.error_types[err.split(":")[0].split(" ")[0]] += 1
                for s in r["slots"]:
                    failed[s[0]] = err
                    errs[s[0]] += 1
            elif self.cache is not None:
                self.cache.put(self.cache.key(self.api.api, self.base_url, self.api.body(u.request), u.request.seed),
                               dict(texts=texts, reasons=reasons, meta=meta, data=None))
        J.append(dict(event="merged", sub=sub))
        return True

    def _pending(self, J, by_id, store, rep, tasks, max_attempts, failed):
        states = []
        for sub, st in self._mine(J, by_id).items():
            if not st["merged"]:
                states.append(f"{st['batch_id'] or 'submission ' + sub}: "
                              f"{st['ended']['status'] if st['ended'] else 'running'}, "
                              f"{len(st['intent']['requests'])} requests, age {_age(time.time() - st['intent']['unix'])}")
        finish_report(store, tasks, max_attempts, rep, failed)
        rep.stopped = "stopped waiting for the batches"
        argv = session_info()["argv"]
        raise BatchPendingError(rep, states, store.dir, " ".join(shlex.quote(str(a)) for a in argv))


def _request_of(r, by_id, backend):
    """The request of a journal entry, rebuilt from its task and seed (for the record's fields)."""
    from .backends import Request

    t = by_id[r["slots"][0][0]]
    return Request.from_prompt(t.prompt, system=t.system, seed=int(r["seed"]), sampling=t.sampling or backend._sampling)


def run_requests(backend, store, tasks, parse, *, groups=None, **kw) -> RunReport:
    """Send ``tasks`` the way ``backend`` and ``groups`` call for: a batch backend runs them itself, requests
    of several samples (``groups``, :mod:`moralkit.collect.units`) go through
    :func:`~moralkit.collect.units.run_grouped_online`, the rest through :func:`moralkit.collect.runner.run_tasks`.

    An online session on a run with batch submissions still open for these tasks is refused: it would pay
    for their requests twice.
    """
    if hasattr(backend, "run_tasks"):
        return backend.run_tasks(store, tasks, parse, groups=groups, **kw)
    if (store.dir / JOURNAL).exists():
        ids = {t.task for t in tasks}
        open_subs = [s for s, st in Journal(store.dir).submissions().items() if not st["merged"] and any(
            sl[0] in ids for r in st["intent"]["requests"] for sl in r["slots"])]
        if open_subs:
            raise MoralkitError(
                f"{store.dir} has {len(open_subs)} batch submission(s) not collected yet ({', '.join(open_subs[:3])}); "
                "sending their requests online would pay for them twice. Re-run the command with --batch to "
                "collect them first.")
    if groups and any(len(ids) > 1 for _, ids in groups):
        return run_grouped_online(backend, store, tasks, parse, groups=groups, **kw)
    return run_tasks(backend, store, tasks, parse, **kw)
