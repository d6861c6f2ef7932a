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

:class:`RunReport` says what a session did and what is left; :meth:`RunReport.line` is the
completeness line every collection command prints, and :class:`CollectionIncompleteError` carries it
when tasks remain undone.

References
----------
Seror (2025), Section 2.1 (up to three attempts per round); Scherrer et al. (2023), Section 3.3.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import heapq
import re
import signal
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from ..errors import MoralkitError
from .backends import (
    FATAL_STATUS,
    LENGTH_REASONS,
    Completion,
    Request,
    Sampling,
    merge_request_logs,
    retry_delay,
    run_sync,
)
from .store import derive_seed, prompt_sha256, utc_now

__all__ = ["Task", "RunReport", "CollectionIncompleteError", "CollectionRefusedError", "incomplete_error",
           "run_tasks", "check_label", "iso_time", "LABEL_RE"]

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


@dataclass
class RunReport:
    """What one collection session did, and what is left.

    ``tasks`` were requested; ``done`` of them are complete (``answered`` with a valid answer, the
    rest ``missing`` after ``max_attempts`` attempts without one); ``undone`` lists the others with
    their last error in ``last_errors``. ``sent`` requests this session gave ``attempts`` records
    and ``errors`` error records. ``stopped`` says why the session stopped early, if it did.
    ``busy_slot_seconds / wall_seconds`` is the mean number of requests in flight.
    """

    tasks: int = 0
    done: int = 0
    answered: int = 0
    undone: list = field(default_factory=list)
    sent: int = 0
    attempts: int = 0
    errors: int = 0
    last_errors: dict = field(default_factory=dict)
    error_types: Counter = field(default_factory=Counter)
    stopped: str | None = None
    refused: str | None = None
    wall_seconds: float = 0.0
    busy_slot_seconds: float = 0.0
    #: answers recorded with status ``length`` (empty: the output budget ran out)
    length: int = 0

    #: tokens the server counted in this session's responses (``None`` counts as 0)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: dollars of this session (``None``: no price known; see :mod:`moralkit.collect.cost`)
    cost: float | None = None
    #: dollars of the whole run so far and its ``--max-cost`` (``None`` without a budget)
    run_cost: float | None = None
    max_cost: float | None = None

    @property
    def fatal(self) -> bool:
        """The session stopped on something no retry fixes (a refused parameter, key or model): exit status 2."""
        return self.refused is not None

    @property
    def missing(self) -> int:
        return self.done - self.answered

    @property
    def complete(self) -> bool:
        return not self.undone

    @property
    def mean_busy_slots(self) -> float:
        return self.busy_slot_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def merge(self, other: "RunReport") -> "RunReport":
        """The report of two consecutive phases of one session (e.g. round 0, then the rounds)."""
        out = RunReport(
            tasks=self.tasks + other.tasks, done=self.done + other.done, answered=self.answered + other.answered,
            undone=self.undone + other.undone, sent=self.sent + other.sent, attempts=self.attempts + other.attempts,
            errors=self.errors + other.errors, last_errors={**self.last_errors, **other.last_errors},
            error_types=self.error_types + other.error_types, stopped=self.stopped or other.stopped,
            refused=self.refused or other.refused,
            wall_seconds=self.wall_seconds + other.wall_seconds,
            busy_slot_seconds=self.busy_slot_seconds + other.busy_slot_seconds, length=self.length + other.length,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0),
            run_cost=other.run_cost if other.run_cost is not None else self.run_cost,
            max_cost=other.max_cost if other.max_cost is not None else self.max_cost)
        return out

    def line(self, unit: str = "tasks", answered: str = "answered", missing: str = "missing") -> str:
        """The completeness line: ``complete: 160/160 rounds done (158 answered, 2 missing), 0 undone; ...``.

        ``unit``, ``answered`` and ``missing`` name the tasks, the valid answers and the others
        (MoralChoice: ``answers``, ``mapped to an action``, ``refusal or invalid``).
        """
        head = "complete" if self.complete else "INCOMPLETE"
        s = (f"{head}: {self.done}/{self.tasks} {unit} done ({self.answered} {answered}, {self.missing} {missing}), "
             f"{len(self.undone)} undone; this session: {self.sent} requests, {self.attempts} answers recorded, "
             f"{self.errors} errors retried or left")
        if self.error_types:
            s += " (" + ", ".join(f"{k} {v}" for k, v in self.error_types.most_common()) + ")"
        if self.length:
            s += (f"; {self.length} answers empty at the output budget (status length: raise --max-tokens, "
                  "reasoning models spend it on hidden reasoning)")
        return s + self.cost_text()

    def cost_text(self) -> str:
        """``; tokens 12,345 in / 678 out, $0.0123`` (and the run's cost against ``--max-cost``)."""
        def format_usd(x):  # as moralkit.collect.cost.format_usd (which imports this module's users)
            return f"${x:,.2f}" if abs(x) >= 1 else f"${x:.4f}"

        s = f"; tokens {self.prompt_tokens:,} in / {self.completion_tokens:,} out"
        if self.cost is not None:
            s += f", {format_usd(self.cost)}"
        if self.max_cost is not None and self.run_cost is not None:
            s += (f"; run so far {format_usd(self.run_cost)} of --max-cost {format_usd(self.max_cost)}, "
                  f"{format_usd(self.max_cost - self.run_cost)} remains")
        return s

    def problem(self) -> str | None:
        """Why the session is incomplete, naming requests and the server's message; ``None`` if complete."""
        if self.complete:
            return None
        parts = []
        if self.stopped:
            parts.append(f"stopped: {self.stopped}")
        named = [(t, self.last_errors[t]) for t in self.undone if t in self.last_errors]
        for t, e in named[:3]:
            parts.append(f"request {t!r} failed: {e}")
        if len(named) > 3:
            parts.append(f"... and {len(named) - 3} more failed requests")
        n_unsent = len(self.undone) - len(named)
        if n_unsent:
            parts.append(f"{n_unsent} task(s) not sent or not finished")
        if self.refused:
            if re.search(r"\bHTTP (400|422)\b", self.refused):  # a parameter the server refuses
                return "; ".join(parts) + (". Retrying cannot fix this: change what the message names and re-run to "
                                           "resume. Completed records are saved.")
            return "; ".join(parts) + (". Retrying cannot fix this: check the key (the environment variable named "
                                       "by --api-key-env), the model name and the base URL. Completed records "
                                       "are saved.")
        return "; ".join(parts) + ". Completed records are saved; re-run the same command to resume."

    def to_dict(self) -> dict:
        return dict(tasks=self.tasks, done=self.done, answered=self.answered, missing=self.missing,
                    undone=len(self.undone), sent=self.sent, attempts=self.attempts, errors=self.errors,
                    error_types=dict(self.error_types), stopped=self.stopped, length=self.length, fatal=self.fatal,
                    mean_busy_slots=round(self.mean_busy_slots, 3), prompt_tokens=self.prompt_tokens,
                    completion_tokens=self.completion_tokens,
                    cost_usd=None if self.cost is None else round(self.cost, 6),
                    run_cost_usd=None if self.run_cost is None else round(self.run_cost, 6), max_cost_usd=self.max_cost)


class CollectionIncompleteError(MoralkitError):
    """A collection session ended with tasks undone. ``report`` (a :class:`RunReport`) says which and why.

    Every completed record is saved: re-running the same command resumes.
    """

    def __init__(self, report: RunReport, *labels: str):
        self.report = report
        super().__init__(f"{report.line(*labels)}. {report.problem()}")


class CollectionRefusedError(MoralkitError):
    """A collection session was stopped by a response no retry can fix (wrong key, unknown model, a server
    that cannot do what is asked). ``report`` says what was done; the message carries the server's
    (redacted) message. The command line exits with status 2."""

    def __init__(self, report: RunReport, *labels: str):
        self.report = report
        super().__init__(f"the server refused the collection: {report.refused}. {report.problem()} "
                         f"[{report.line(*labels)}]")


def incomplete_error(report: RunReport, *labels: str) -> MoralkitError:
    """The error for a session that ended with tasks undone: :class:`CollectionRefusedError` when a
    response no retry can fix stopped it, else :class:`CollectionIncompleteError` (re-run to resume)."""
    if report.refused:
        return CollectionRefusedError(report, *labels)
    return CollectionIncompleteError(report, *labels)


def _error_kind(c: Completion, error: str) -> str:
    if c.status_code and c.status_code != 200:
        return f"HTTP {c.status_code}"
    return error.split(":")[0].split(" ")[0]


class _Scheduler:
    """Which task to send next: ready tasks in order, retries after their backoff, give-ups."""

    def __init__(self, tasks, store, max_attempts, max_retries, backoff, max_consecutive):
        self.store = store
        self.max_attempts = max_attempts
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_consecutive = max_consecutive
        self.ready = deque(t for t in tasks if not self.is_done(t))
        self.delayed: list = []
        self.seq = 0
        self.errors = Counter()
        self.consecutive = 0
        self.consecutive_length = 0
        self.stopped = None
        self.refused = None
        self.failed: dict[str, str] = {}

    def is_done(self, t: Task) -> bool:
        att = self.store.attempts(t.task)
        return any(a.get("status") == "ok" for a in att) or len(att) >= self.max_attempts

    def _promote(self):
        now = time.monotonic()
        back = []
        while self.delayed and self.delayed[0][0] <= now:
            back.append(heapq.heappop(self.delayed)[2])
        for t in reversed(back):
            self.ready.appendleft(t)

    def next_ready(self, like: Task | None = None) -> Task | None:
        """The next task to send, or None. With ``like``, only a task batchable with it."""
        if STOP.is_set() and not self.stopped:
            self.stopped = stop_requested()
        if self.stopped:
            return None
        self._promote()
        if not self.ready:
            return None
        if like is not None:
            t = self.ready[0]
            if t.group != like.group or t.sampling != like.sampling or t.system != like.system:
                return None
        return self.ready.popleft()

    def wait_time(self) -> float | None:
        """Seconds until a delayed task is due (None: nothing is waiting)."""
        if self.stopped or not self.delayed:
            return None
        return max(0.0, self.delayed[0][0] - time.monotonic())

    def answered(self, t: Task, status=None) -> None:
        self.consecutive = 0
        self.consecutive_length = self.consecutive_length + 1 if status == "length" else 0
        if self.consecutive_length >= self.max_consecutive and not self.stopped:
            self.stopped = (f"{self.consecutive_length} answers in a row were empty at the output budget "
                            "(finish_reason length): raise --max-tokens (a reasoning model spends it on hidden "
                            "reasoning)")
            self.refused = self.refused or self.stopped
        if not self.is_done(t):
            self.ready.appendleft(t)

    def failed_try(self, t: Task, c: Completion, message: str, fatal: bool = False) -> None:
        self.errors[t.task] += 1
        self.consecutive += 1
        if fatal or c.fatal or c.status_code in FATAL_STATUS:
            if self.refused is None:
                self.refused = f"request {t.task!r}: {message}"
                self.stopped = f"request {t.task!r}: {message} (retrying cannot fix this)"
            self.failed[t.task] = message
            return
        if self.consecutive >= self.max_consecutive:
            self.stopped = f"{self.consecutive} requests failed in a row; the last, {t.task!r}: {message}"
            self.failed[t.task] = message
            return
        if self.errors[t.task] > self.max_retries:
            self.failed[t.task] = f"{message} (tried {self.errors[t.task]} times this session)"
            return
        delay = retry_delay(self.errors[t.task] - 1, c.retry_after, self.backoff)
        self.seq += 1
        heapq.heappush(self.delayed, (time.monotonic() + delay, self.seq, t))


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
    common = dict(common or {})
    C = max(1, int(getattr(backend, "concurrency", 1) or 1))
    max_retries = int(getattr(backend, "max_retries", 6))
    backoff = float(getattr(backend, "backoff", 1.0))
    mce = max_consecutive_errors or max(25, 4 * C)
    sched = _Scheduler(tasks, store, max_attempts, max_retries, backoff, mce)
    rep = RunReport(tasks=len(tasks))
    if bar is not None:
        bar.update(len(tasks) - len(sched.ready))
    redact = store.redact
    for s in getattr(backend, "secrets", lambda: [])():
        redact.add(s)
    sched.redact = redact  # errors are redacted before they are cut (handle() cuts them)
    attempt_no = {}
    # tokens, cost, budget and tokens-per-minute pace (moralkit.collect.cost.CostMeter), when attached
    meter = getattr(backend, "cost_meter", None)
    if meter is not None:
        meter.begin(store.records)

    def request_for(t: Task) -> Request:
        # the next attempt number: one more than the last stored (attempts are 1..n, so this is n + 1; after
        # a repair set one aside, a gap is never re-filled with a number that is already taken)
        a = max((int(r["attempt"]) for r in store.attempts(t.task)), default=0) + 1
        attempt_no[t.task] = a
        if t.messages is not None:
            return Request(messages=tuple(t.messages), seed=derive_seed(seed, t.task, a),
                           sampling=t.sampling or sampling, extra_body=t.extra_body)
        rq = Request.from_prompt(t.prompt, system=t.system, seed=derive_seed(seed, t.task, a),
                                 sampling=t.sampling or sampling)
        if t.extra_body is not None:
            rq = Request(messages=rq.messages, seed=rq.seed, sampling=rq.sampling, extra_body=t.extra_body)
        return rq

    def handle(t: Task, rq: Request, c: Completion, batch: int) -> None:
        a = attempt_no[t.task]
        rep.sent += 1
        rep.prompt_tokens += c.prompt_tokens or 0
        rep.completion_tokens += c.completion_tokens or 0
        if meter is not None:
            meter.settle(rq, c)
        base = dict(common, task=t.task, **t.fields, seed=rq.seed, prompt_sha256=prompt_sha256(rq.messages),
                    sampling=rq.sampling.to_dict(), started=iso_time(c.started), finished=utc_now(),
                    latency_s=round(c.latency_s, 4), prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens, finish_reason=c.finish_reason, response_model=c.model)
        for k in ("response_id", "system_fingerprint", "reasoning_tokens"):  # when the provider sends them
            if getattr(c, k, None) is not None:
                base[k] = getattr(c, k)
        if record_batch:
            base["batch"] = batch
        if getattr(c, "cached", None):  # served by the response cache (moralkit.collect.cache): when it was stored
            base["cached"] = c.cached
        rep.busy_slot_seconds += max(0.0, c.latency_s)
        error = c.error
        fatal = False
        if error is None:
            try:
                res = parse(t, c if parse_completion else c.text)
                value, status = (res.value, res.status) if hasattr(res, "status") else res
                value = list(value) if isinstance(value, tuple) else value
            except Exception as e:  # a parser failure is this request's error, never the run's
                error = f"ParseError {type(e).__name__}: {redact.error_text(str(e), 400)}"
                fatal = isinstance(e, MoralkitError)  # the response shows the server cannot do what is asked
        if error is not None:
            msg = redact.error_text(error, 600)
            rec = dict(base, kind="error", attempt=a, error=msg)
            if c.status_code is not None:
                rec["status_code"] = c.status_code
            if c.retry_after is not None:
                rec["retry_after"] = c.retry_after
            store.append(rec)
            rep.errors += 1
            rep.error_types[_error_kind(c, error)] += 1
            sched.failed_try(t, c, msg, fatal=fatal)
            return
        if status != "ok" and c.finish_reason in LENGTH_REASONS and not (c.text or "").strip():
            status = "length"  # nothing to parse: the output budget ran out (not the model's invalid answer)
            rep.length += 1
        store.append(dict(base, kind="attempt", attempt=a, raw=c.text, parsed=value, status=status))
        rep.attempts += 1
        sched.answered(t, status)
        if bar is not None and sched.is_done(t):
            bar.update(1)

    t0 = time.perf_counter()
    try:
        if hasattr(backend, "open_session"):
            run_sync(_pool(backend, sched, request_for, handle, C, meter))
        else:
            _batches(backend, sched, request_for, handle, meter)
    finally:
        rep.wall_seconds = time.perf_counter() - t0
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
    return rep


#: Set by the first SIGINT / SIGTERM while :func:`stop_on_signals` is active: every session stops sending,
#: awaits the requests in flight and stores their answers, then ends incomplete (re-run to resume).
STOP = threading.Event()
STOP_REASON: dict = {}


def stop_requested() -> str | None:
    """Why the collection is stopping (a signal received), or None."""
    return STOP_REASON.get("why") if STOP.is_set() else None


@contextlib.contextmanager
def stop_on_signals(signals=(signal.SIGINT, signal.SIGTERM)):
    """Drain instead of dying: the first SIGINT or SIGTERM stops new requests, the requests in flight are
    awaited and their answers stored (they are paid for), and the session ends incomplete (exit status 3,
    re-run to resume). A second signal ends the process at once (SIGINT: ``KeyboardInterrupt``).

    Only the main thread can install signal handlers; elsewhere this does nothing. A SIGKILL cannot be
    caught: the answers of requests in flight at that moment are paid for and lost (their resume sends
    them again).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}

    def handler(signum, frame):
        if STOP.is_set():  # the second signal: do not wait any more
            for s, h in old.items():
                signal.signal(s, h)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.raise_signal(signum)
            return
        STOP_REASON["why"] = (f"interrupted by {signal.Signals(signum).name}: the requests in flight were awaited "
                              "and stored; re-run the same command to resume")
        STOP.set()

    for s in signals:
        old[s] = signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        STOP.clear()
        STOP_REASON.clear()


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
