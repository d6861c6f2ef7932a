"""The one request runner of both surveys: a pool that never loses a response and never stalls on one.

:func:`run_tasks` sends every :class:`Task` until it is *done* (a valid answer, or ``max_attempts``
attempts without one) and writes one record per response as it arrives, through a
:class:`~moralkit.collect.store.RecordStore`. The PSM (:mod:`moralkit.collect.psm`) and MoralChoice
(:mod:`moralkit.collect.moralchoice`) collectors both call it.

How requests are sent:

- **A pool** for backends with ``open_session()`` (:class:`~moralkit.collect.backends.OpenAIBackend`):
  ``backend.concurrency`` requests in flight at all times; a slow request holds one slot, not a batch.
  It runs inside a running event loop too (Jupyter), through
  :func:`~moralkit.collect.backends.run_sync`.
- **Batches** of ``backend.batch_size`` for the others (local models batch their forward passes);
  a batch holds consecutive tasks of one ``group`` with one sampling and system message.

What happens to each response:

- a usable response is parsed and stored as an ``attempt`` record at once; if the task still needs
  an answer it goes back to the front of the queue;
- anything else, whether a transport error, an HTTP error, a malformed body (bad JSON, HTML, empty
  ``choices``, null content), or an exception while parsing, is stored as an ``error`` record for that
  request (secrets redacted), which is not an attempt, and the request is re-sent after
  :func:`~moralkit.collect.backends.retry_delay` (``Retry-After`` honoured, exponential backoff with
  jitter). Other requests keep going meanwhile;
- a task that fails ``backend.max_retries + 1`` times in one session is left undone, named with its
  last error; ``max_consecutive_errors`` failures in a row stop the session (requests in flight are
  still awaited and stored);
- a response that no retry can fix stops the session at once and makes it *refused*: an HTTP status in
  :data:`~moralkit.collect.backends.FATAL_STATUS` (400/422 a parameter the server refuses, named with
  the flag that changes it; 401 wrong key, 403 no access, 404 unknown model;
  a status joins by being added to that one tuple), or a parser's
  :class:`~moralkit.errors.MoralkitError` (a server that cannot do what is asked, e.g. score given
  text). :func:`incomplete_error` then gives a :class:`CollectionRefusedError` (command-line status 2,
  the server's redacted message, no advice to re-run) instead of a :class:`CollectionIncompleteError`
  (status 3, re-run to resume).
- an empty answer cut by the output budget (``finish_reason`` ``length``, Anthropic ``max_tokens``) is
  stored as an attempt with status ``length``, not as an invalid answer, and counted in the report;
  ``max_consecutive_errors`` of them in a row refuse the session (a budget spent on hidden reasoning:
  raise ``--max-tokens``).

Each record also carries what identifies the answer when the provider sends it: ``response_id``,
``system_fingerprint`` (OpenAI: seeded answers repeat only while it does) and ``reasoning_tokens``.
The parameters the backend sent (``backend.take_request_log()``) go to the session record of the
manifest (``sent``, and ``adaptations`` such as a switch to ``max_completion_tokens``).

The answer of a request depends only on its prompt and its seed, ``derive_seed(seed, task, attempt)``;
retries after errors re-send the same attempt with the same seed.

:class:`~moralkit.collect.run_report.RunReport` says what a session did and what is left; its
:meth:`~moralkit.collect.run_report.RunReport.line` is the completeness line every collection command
prints, and :class:`~moralkit.collect.run_report.CollectionIncompleteError` carries it when tasks remain
undone. :class:`~moralkit.collect.scheduler.Scheduler` decides which request goes next.

:func:`run_tasks` runs in four phases: plan (which tasks are left, the backend's limits, the budget),
send (a pool or batches), store (each response as it arrives) and close (the report, the manifest).

References
----------
Seror (2025), Section 2.1 (up to three attempts per round); Scherrer et al. (2023), Section 3.3.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import re
import time
from dataclasses import dataclass, field

from ..errors import MoralkitError
from .backends import (
    LENGTH_REASONS,
    Completion,
    Request,
    Sampling,
    merge_request_logs,
    run_sync,
)
from .run_report import CollectionIncompleteError, CollectionRefusedError, RunReport, incomplete_error  # noqa: F401
from .scheduler import STOP, STOP_REASON, Scheduler, stop_on_signals, stop_requested  # noqa: F401
from .store import derive_seed, prompt_sha256, utc_now

# RunReport and its errors live in run_report, the scheduler and the stop signal in scheduler; they are
# imported here so that ``from moralkit.collect.runner import RunReport`` keeps working.
__all__ = ["Task", "run_tasks", "check_label", "iso_time", "LABEL_RE"]

#: What a respondent label may look like: it names files and appears in tidy data.
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")


def check_label(label) -> str:
    """Return ``label`` if it is a file-name-safe respondent label, else raise :class:`~moralkit.errors.MoralkitError`.

    Examples
    --------
    >>> check_label("gpt-4o-mini+persona-care")
    'gpt-4o-mini+persona-care'
    """
    if not isinstance(label, str) or not LABEL_RE.match(label):
        raise MoralkitError(f"label must be a file-name-safe string (letters, digits, . _ @ + -), got {label!r}")
    return label


def iso_time(ts) -> str | None:
    """A POSIX timestamp as UTC ISO 8601 with milliseconds and ``Z`` (``None`` for 0 or ``None``).

    Examples
    --------
    >>> iso_time(0.0) is None, iso_time(1.7e9)
    (True, '2023-11-14T22:13:20.000Z')
    """
    if not ts:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    """One question to ask until it is done.

    Parameters
    ----------
    task : str
        Identifier, unique in the run (``r001``; ``<scenario>|<type>|<ordering>|<sample>``).
    prompt : str
        The user message.
    fields : dict
        Extra fields of every record of this task (``round``, ``corner``; ``scenario_id``, ...).
    system : str, optional
        System message.
    sampling : Sampling, optional
        Per-task sampling (default: the ``sampling`` passed to :func:`run_tasks`).
    group : hashable, optional
        Batch backends put only consecutive tasks of one group into one batch.
    context : any
        Passed to the parse function with the text (e.g. the scenario's actions).
    messages : tuple of dict, optional
        The whole conversation to send, in place of ``system`` + ``prompt`` (e.g. one that ends with an
        assistant turn to be scored).
    extra_body : dict, optional
        Extra request fields for OpenAI-compatible servers (:attr:`~moralkit.collect.backends.Request.extra_body`);
        the response's JSON is then in :attr:`~moralkit.collect.backends.Completion.data`.
    """

    task: str
    prompt: str
    fields: dict = field(default_factory=dict)
    system: str | None = None
    sampling: Sampling | None = None
    group: object = None
    context: object = None
    messages: tuple | None = None
    extra_body: dict | None = None



def _error_kind(c: Completion, error: str) -> str:
    if c.status_code and c.status_code != 200:
        return f"HTTP {c.status_code}"
    return error.split(":")[0].split(" ")[0]




def run_tasks(backend, store, tasks, parse, *, seed: int, sampling: Sampling, max_attempts: int = 1,
              common: dict | None = None, bar=None, record_batch: bool = False,
              max_consecutive_errors: int | None = None, parse_completion: bool = False) -> RunReport:
    """Send every task until it is done; store one record per response as it arrives.

    Parameters
    ----------
    backend : Backend
        A pool backend (``open_session()``) or a batch backend (``generate``); see the module docstring.
    store : RecordStore
        Open for writing (holds the run's lock).
    tasks : list of Task
        In sending order. Tasks already done in ``store`` are skipped (resume).
    parse : callable
        ``parse(task, text) -> (value, status)`` (or an object with ``.value`` and ``.status``, like
        :class:`moralkit.psm.design.ParseResult`); ``status == "ok"`` is a valid answer.
        An exception here is recorded as the request's error and the request is retried; a
        :class:`~moralkit.errors.MoralkitError` says that no retry can help, and stops the session
        (refused).
    seed : int
        Run seed; attempt ``a`` of task ``t`` is sent with ``derive_seed(seed, t, a)``.
    sampling : Sampling
        Default sampling of tasks that do not set their own.
    max_attempts : int
        Attempts (usable responses) per task before it is done without a valid answer.
    common : dict, optional
        Fields of every record (run, survey, label, backend, model, ...).
    bar : tqdm, optional
        Advanced by one per task done.
    record_batch : bool
        Add ``batch`` (requests in the forward batch, or in flight) to every record.
    max_consecutive_errors : int, optional
        Stop after this many failures in a row (default ``max(25, 4 * concurrency)``).
    parse_completion : bool
        Call ``parse(task, completion)`` with the whole :class:`~moralkit.collect.backends.Completion`
        (its ``data`` holds the response's JSON) instead of ``parse(task, text)``.

    Returns
    -------
    RunReport
    """
    session = _plan(backend, store, tasks, parse, seed=seed, sampling=sampling, max_attempts=max_attempts,
                    common=common, bar=bar, record_batch=record_batch,
                    max_consecutive_errors=max_consecutive_errors, parse_completion=parse_completion)
    t0 = time.perf_counter()
    try:
        _send(backend, session)
    finally:
        _close(backend, session, tasks, time.perf_counter() - t0)
    return session.report


@dataclass
class _Session:
    """One call of :func:`run_tasks`: what it sends with, and what it has stored so far."""

    store: object
    parse: object
    seed: int
    sampling: Sampling
    common: dict
    bar: object
    record_batch: bool
    parse_completion: bool
    sched: Scheduler
    report: RunReport
    meter: object = None
    concurrency: int = 1
    attempt_no: dict = field(default_factory=dict)

    def request_for(self, t: Task) -> Request:
        """The request of ``t``'s next attempt, seeded by ``derive_seed(seed, task, attempt)``."""
        # the next attempt number: one more than the last stored (attempts are 1..n, so this is n + 1; after
        # a repair set one aside, a gap is never re-filled with a number that is already taken)
        a = max((int(r["attempt"]) for r in self.store.attempts(t.task)), default=0) + 1
        self.attempt_no[t.task] = a
        seed, sampling = derive_seed(self.seed, t.task, a), t.sampling or self.sampling
        if t.messages is not None:
            return Request(messages=tuple(t.messages), seed=seed, sampling=sampling, extra_body=t.extra_body)
        rq = Request.from_prompt(t.prompt, system=t.system, seed=seed, sampling=sampling)
        if t.extra_body is not None:
            rq = Request(messages=rq.messages, seed=rq.seed, sampling=rq.sampling, extra_body=t.extra_body)
        return rq

    def handle(self, t: Task, rq: Request, c: Completion, batch: int) -> None:
        """Phase 3: store one response as it arrives, an ``attempt`` or an ``error`` record, and tell the
        scheduler (done, back to the queue, retried after a backoff, or the session stops)."""
        rep, meter = self.report, self.meter
        rep.sent += 1
        rep.prompt_tokens += c.prompt_tokens or 0
        rep.completion_tokens += c.completion_tokens or 0
        if meter is not None:
            meter.settle(rq, c)
        base = self._record_base(t, rq, c, batch)
        rep.busy_slot_seconds += max(0.0, c.latency_s)
        error, fatal, value, status = c.error, False, None, None
        if error is None:
            error, fatal, value, status = self._parse(t, c)
        if error is not None:
            self._store_error(t, c, base, error, fatal)
            return
        if status != "ok" and c.finish_reason in LENGTH_REASONS and not (c.text or "").strip():
            status = "length"  # nothing to parse: the output budget ran out (not the model's invalid answer)
            rep.length += 1
        self.store.append(dict(base, kind="attempt", attempt=self.attempt_no[t.task], raw=c.text, parsed=value,
                               status=status))
        rep.attempts += 1
        self.sched.answered(t, status)
        if self.bar is not None and self.sched.is_done(t):
            self.bar.update(1)

    def _record_base(self, t: Task, rq: Request, c: Completion, batch: int) -> dict:
        """The fields of every record of this response (the run's, the task's, the request's, the server's)."""
        base = dict(self.common, task=t.task, **t.fields, seed=rq.seed, prompt_sha256=prompt_sha256(rq.messages),
                    sampling=rq.sampling.to_dict(), started=iso_time(c.started), finished=utc_now(),
                    latency_s=round(c.latency_s, 4), prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens, finish_reason=c.finish_reason, response_model=c.model)
        for k in ("response_id", "system_fingerprint", "reasoning_tokens"):  # when the provider sends them
            if getattr(c, k, None) is not None:
                base[k] = getattr(c, k)
        if self.record_batch:
            base["batch"] = batch
        if getattr(c, "cached", None):  # served by the response cache (moralkit.collect.cache): when it was stored
            base["cached"] = c.cached
        return base

    def _parse(self, t: Task, c: Completion):
        """``(error, fatal, value, status)`` of a response's answer: a parser failure is this request's error,
        never the run's; a :class:`~moralkit.errors.MoralkitError` is fatal (the server cannot do what is asked)."""
        try:
            res = self.parse(t, c if self.parse_completion else c.text)
            value, status = (res.value, res.status) if hasattr(res, "status") else res
            return None, False, list(value) if isinstance(value, tuple) else value, status
        except Exception as e:
            error = f"ParseError {type(e).__name__}: {self.store.redact.error_text(str(e), 400)}"
            return error, isinstance(e, MoralkitError), None, None

    def _store_error(self, t: Task, c: Completion, base: dict, error: str, fatal: bool) -> None:
        """An ``error`` record (redacted; not an attempt), and the scheduler's retry, give-up or stop."""
        msg = self.store.redact.error_text(error, 600)
        rec = dict(base, kind="error", attempt=self.attempt_no[t.task], error=msg)
        if c.status_code is not None:
            rec["status_code"] = c.status_code
        if c.retry_after is not None:
            rec["retry_after"] = c.retry_after
        self.store.append(rec)
        self.report.errors += 1
        self.report.error_types[_error_kind(c, error)] += 1
        self.sched.failed_try(t, c, msg, fatal=fatal)


def _plan(backend, store, tasks, parse, *, seed, sampling, max_attempts, common, bar, record_batch,
          max_consecutive_errors, parse_completion) -> _Session:
    """Phase 1: the session's plan: which tasks are still to do (resume), the backend's limits, the secrets
    to redact, and the cost meter's view of what the run has spent."""
    C = max(1, int(getattr(backend, "concurrency", 1) or 1))
    max_retries = int(getattr(backend, "max_retries", 6))
    backoff = float(getattr(backend, "backoff", 1.0))
    mce = max_consecutive_errors or max(25, 4 * C)
    sched = Scheduler(tasks, store, max_attempts, max_retries, backoff, mce)
    if bar is not None:
        bar.update(len(tasks) - len(sched.ready))
    for s in getattr(backend, "secrets", lambda: [])():
        store.redact.add(s)
    sched.redact = store.redact  # errors are redacted before they are cut (handle() cuts them)
    # tokens, cost, budget and tokens-per-minute pace (moralkit.collect.cost.CostMeter), when attached
    meter = getattr(backend, "cost_meter", None)
    if meter is not None:
        meter.begin(store.records)
    return _Session(store=store, parse=parse, seed=seed, sampling=sampling, common=dict(common or {}), bar=bar,
                    record_batch=record_batch, parse_completion=parse_completion, sched=sched,
                    report=RunReport(tasks=len(tasks)), meter=meter, concurrency=C)


def _send(backend, session: _Session) -> None:
    """Phase 2: the send loop, a pool of ``concurrency`` requests in flight (backends with ``open_session()``)
    or batches (the others), until every task is done or the session stops; requests in flight are awaited
    and stored (phase 3, :meth:`_Session.handle`) before it returns."""
    sched, meter = session.sched, session.meter
    if hasattr(backend, "open_session"):
        run_sync(_pool(backend, sched, session.request_for, session.handle, session.concurrency, meter))
    else:
        _batches(backend, sched, session.request_for, session.handle, meter)


def _close(backend, session: _Session, tasks, wall_seconds: float) -> None:
    """Phase 4: the shutdown, also after an exception: the report's cost, which tasks are done or undone and
    why, and the parameters the backend sent, in the manifest's session record."""
    rep, sched, store, meter = session.report, session.sched, session.store, session.meter
    rep.wall_seconds = wall_seconds
    if meter is not None and meter.price is not None:
        rep.cost = meter.price.cost(rep.prompt_tokens, rep.completion_tokens)
        rep.run_cost, rep.max_cost = meter.spent, meter.max_cost
    for t in tasks:
        if sched.is_done(t):
            rep.done += 1
            rep.answered += any(a.get("status") == "ok" for a in store.attempts(t.task))
        else:
            rep.undone.append(t.task)
    rep.last_errors = {t: e for t, e in sched.failed.items() if t in set(rep.undone)}
    rep.stopped = sched.stopped
    rep.refused = sched.refused
    _record_sent(backend, store)


def _record_sent(backend, store) -> None:
    """Add the parameters ``backend`` sent this session to the manifest's session record."""
    take = getattr(backend, "take_request_log", None)
    sessions = store.manifest.get("sessions") if not store.readonly else None
    if take is None or not sessions:
        return
    log = take()
    sess = sessions[-1]
    sess["sent"] = merge_request_logs(sess.get("sent"), log["sent"])
    if log["adaptations"]:
        sess["adaptations"] = sess.get("adaptations", []) + log["adaptations"]
    store.update_manifest()


def _admit(meter, sched, rq) -> bool:
    """Whether the budget lets ``rq`` be sent; if not, the session stops (the task stays undone)."""
    if meter is None or meter.admit(rq):
        return True
    sched.stopped = meter.stop_message()
    return False


def _batches(backend, sched, request_for, handle, meter=None):
    B = max(1, int(getattr(backend, "batch_size", 1)))
    while not sched.stopped:
        batch = []
        while len(batch) < B:
            t = sched.next_ready(batch[0] if batch else None)
            if t is None:
                break
            batch.append(t)
        if not batch:
            w = sched.wait_time()
            if w is None:
                return
            time.sleep(w)
            continue
        reqs = [request_for(t) for t in batch]
        admitted = 0
        while admitted < len(reqs) and _admit(meter, sched, reqs[admitted]):
            admitted += 1
        batch, reqs = batch[:admitted], reqs[:admitted]
        if not reqs:
            return
        try:
            comps = list(backend.generate(reqs))
            if len(comps) != len(reqs):
                raise RuntimeError(f"the backend returned {len(comps)} answers for {len(reqs)} requests")
        except Exception as e:  # the whole batch failed: each request records the error and is retried
            msg = f"{type(e).__name__}: {getattr(sched, 'redact', str)(str(e))}"
            comps = [Completion(text=None, error=msg, started=time.time()) for _ in reqs]
        for t, rq, c in zip(batch, reqs, comps):
            handle(t, rq, c, len(reqs))


async def _pool(backend, sched, request_for, handle, C, meter=None):
    limiter = meter.tpm_limiter() if meter is not None else None
    async with backend.open_session() as session:
        running: dict = {}

        async def one(rq):
            try:
                if limiter is not None:  # tokens per minute: the prompt and the whole output budget
                    await limiter.acquire(min(meter.worst_case(rq)[0], limiter.max_rate))
                return await session.complete(rq)
            except Exception as e:  # complete() should not raise; if it does, it is this request's error
                return Completion(text=None, error=f"{type(e).__name__}: {getattr(sched, 'redact', str)(str(e))}",
                                  started=time.time())

        while True:
            while len(running) < C:
                t = sched.next_ready()
                if t is None:
                    break
                rq = request_for(t)
                if not _admit(meter, sched, rq):
                    break
                running[asyncio.ensure_future(one(rq))] = (t, rq, len(running) + 1)
            if not running:
                w = sched.wait_time()
                if w is None:
                    return
                await asyncio.sleep(w)
                continue
            done, _ = await asyncio.wait(list(running), timeout=sched.wait_time(),
                                         return_when=asyncio.FIRST_COMPLETED)
            for f in done:
                t, rq, n = running.pop(f)
                handle(t, rq, f.result(), n)
