"""Collecting through the providers' batch APIs (about half the price), resumable at any moment.

``--batch`` on ``collect psm`` / ``collect moralchoice`` sends the survey's requests through OpenAI's
Batch API (``--backend openai``) or Anthropic's Message Batches (``--backend anthropic``); how each API is
called, with the pages of the providers' documentation it follows, is in :mod:`moralkit.collect.batch_apis`.
This module is the life cycle common to both: submit, wait, merge, resume.

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
from ..checks import check_int
from ..errors import MoralkitError
from .backends import Backend
from .batch_apis import ANTHROPIC_ENDED as ANTHROPIC_ENDED
from .batch_apis import MAX_BYTES, MAX_REQUESTS, AnthropicBatches, OpenAIBatches
from .batch_apis import OPENAI_ENDED as OPENAI_ENDED
from .batch_journal import JOURNAL as JOURNAL
from .batch_journal import Journal as Journal
from .batch_journal import age_text
from .batch_journal import batch_state as batch_state
from .cache import DEFAULT_ANTHROPIC_URL, DEFAULT_OPENAI_URL, ResponseCache
from .provenance import session_info
from .runner import STOP, CollectionIncompleteError, RunReport, run_tasks
from .units import Unit, build_units, finish_report, run_grouped_online, store_result, task_done

__all__ = ["BatchBackend", "BatchPendingError", "run_requests"]

# Imported ``X as X`` above: names that lived here before the batch module was split (issue 29); they stay
# importable from this module (``from moralkit.collect.batch import Journal``) but belong to, and are documented
# in, their own.


def _seconds(value, flag: str, bound: str) -> float:
    """``value`` as a number of seconds, ``bound`` being ``">= 0"`` or ``"> 0"``; else a
    :class:`~moralkit.errors.MoralkitError` naming the option."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise MoralkitError(f"{flag} must be a number of seconds {bound}, got {value!r}") from None
    if not (v >= 0 if bound == ">= 0" else v > 0):
        raise MoralkitError(f"{flag} must be {bound} seconds, got {value}")
    return v


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
        wait = None if wait is None else _seconds(wait, "--wait", ">= 0")
        poll_interval = _seconds(poll_interval, "--poll-interval", "> 0")
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
        self.wait = wait
        self.poll_interval = poll_interval
        self.max_retries = check_int(max_retries, "max_retries", minimum=0)
        self.cache = cache
        self.max_requests = check_int(max_requests or MAX_REQUESTS[provider], "max_requests", minimum=1)
        self.status = sys.stderr if status == "stderr" else status
        cls = OpenAIBatches if provider == "openai" else AnthropicBatches
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
        age = age_text(time.time() - (p.get("created_at") or st["intent"]["unix"]))
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
                              f"{len(st['intent']['requests'])} requests, age {age_text(time.time() - st['intent']['unix'])}")
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
