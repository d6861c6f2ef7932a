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
  last error; 401/403/404 (wrong key, no access, unknown model) and ``max_consecutive_errors``
  failures in a row stop the session at once (requests in flight are still awaited and stored).

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
import datetime as _dt
import heapq
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from ..errors import MoralkitError
from .backends import Completion, Request, Sampling, retry_delay, run_sync
from .store import derive_seed, prompt_sha256, utc_now

__all__ = ["Task", "RunReport", "CollectionIncompleteError", "run_tasks", "check_label", "iso_time",
           "LABEL_RE"]

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
    """

    task: str
    prompt: str
    fields: dict = field(default_factory=dict)
    system: str | None = None
    sampling: Sampling | None = None
    group: object = None
    context: object = None


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
    wall_seconds: float = 0.0
    busy_slot_seconds: float = 0.0

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
            wall_seconds=self.wall_seconds + other.wall_seconds,
            busy_slot_seconds=self.busy_slot_seconds + other.busy_slot_seconds)
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
        return "; ".join(parts) + ". Completed records are saved; re-run the same command to resume."

    def to_dict(self) -> dict:
        return dict(tasks=self.tasks, done=self.done, answered=self.answered, missing=self.missing,
                    undone=len(self.undone), sent=self.sent, attempts=self.attempts, errors=self.errors,
                    error_types=dict(self.error_types), stopped=self.stopped,
                    mean_busy_slots=round(self.mean_busy_slots, 3))


class CollectionIncompleteError(MoralkitError):
    """A collection session ended with tasks undone. ``report`` (a :class:`RunReport`) says which and why.

    Every completed record is saved: re-running the same command resumes.
    """

    def __init__(self, report: RunReport, *labels: str):
        self.report = report
        super().__init__(f"{report.line(*labels)}. {report.problem()}")


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
        self.stopped = None
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

    def answered(self, t: Task) -> None:
        self.consecutive = 0
        if not self.is_done(t):
            self.ready.appendleft(t)

    def failed_try(self, t: Task, c: Completion, message: str) -> None:
        self.errors[t.task] += 1
        self.consecutive += 1
        if c.fatal:
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
              max_consecutive_errors: int | None = None) -> RunReport:
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
        An exception here is recorded as the request's error and the request is retried.
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
    attempt_no = {}

    def request_for(t: Task) -> Request:
        a = len(store.attempts(t.task)) + 1
        attempt_no[t.task] = a
        return Request.from_prompt(t.prompt, system=t.system, seed=derive_seed(seed, t.task, a),
                                   sampling=t.sampling or sampling)

    def handle(t: Task, rq: Request, c: Completion, batch: int) -> None:
        a = attempt_no[t.task]
        rep.sent += 1
        base = dict(common, task=t.task, **t.fields, seed=rq.seed, prompt_sha256=prompt_sha256(rq.messages),
                    sampling=rq.sampling.to_dict(), started=iso_time(c.started), finished=utc_now(),
                    latency_s=round(c.latency_s, 4), prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens, finish_reason=c.finish_reason, response_model=c.model)
        if record_batch:
            base["batch"] = batch
        if getattr(c, "cached", None):  # served by the response cache (moralkit.collect.cache): when it was stored
            base["cached"] = c.cached
        rep.busy_slot_seconds += max(0.0, c.latency_s)
        error = c.error
        if error is None:
            try:
                res = parse(t, c.text)
                value, status = (res.value, res.status) if hasattr(res, "status") else res
                value = list(value) if isinstance(value, tuple) else value
            except Exception as e:  # a parser failure is this request's error, never the run's
                error = f"ParseError {type(e).__name__}: {str(e)[:200]}"
        if error is not None:
            msg = redact.error_text(error)
            rec = dict(base, kind="error", attempt=a, error=msg)
            if c.status_code is not None:
                rec["status_code"] = c.status_code
            if c.retry_after is not None:
                rec["retry_after"] = c.retry_after
            store.append(rec)
            rep.errors += 1
            rep.error_types[_error_kind(c, error)] += 1
            sched.failed_try(t, c, msg)
            return
        store.append(dict(base, kind="attempt", attempt=a, raw=c.text, parsed=value, status=status))
        rep.attempts += 1
        sched.answered(t)
        if bar is not None and sched.is_done(t):
            bar.update(1)

    t0 = time.perf_counter()
    try:
        if hasattr(backend, "open_session"):
            run_sync(_pool(backend, sched, request_for, handle, C))
        else:
            _batches(backend, sched, request_for, handle)
    finally:
        rep.wall_seconds = time.perf_counter() - t0
        for t in tasks:
            if sched.is_done(t):
                rep.done += 1
                rep.answered += any(a.get("status") == "ok" for a in store.attempts(t.task))
            else:
                rep.undone.append(t.task)
        rep.last_errors = {t: e for t, e in sched.failed.items() if t in set(rep.undone)}
        rep.stopped = sched.stopped
    return rep


def _batches(backend, sched, request_for, handle):
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
        try:
            comps = list(backend.generate(reqs))
            if len(comps) != len(reqs):
                raise RuntimeError(f"the backend returned {len(comps)} answers for {len(reqs)} requests")
        except Exception as e:  # the whole batch failed: each request records the error and is retried
            comps = [Completion(text=None, error=f"{type(e).__name__}: {str(e)[:300]}", started=time.time())
                     for _ in reqs]
        for t, rq, c in zip(batch, reqs, comps):
            handle(t, rq, c, len(reqs))


async def _pool(backend, sched, request_for, handle, C):
    async with backend.open_session() as session:
        running: dict = {}

        async def one(rq):
            try:
                return await session.complete(rq)
            except Exception as e:  # complete() should not raise; if it does, it is this request's error
                return Completion(text=None, error=f"{type(e).__name__}: {str(e)[:300]}", started=time.time())

        while True:
            while len(running) < C:
                t = sched.next_ready()
                if t is None:
                    break
                rq = request_for(t)
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
