"""Requests that answer one or several tasks: M samples in one request (OpenAI-style ``n``).

By default every MoralChoice sample is its own request with its own seed, ``derive_seed(seed, task,
attempt)`` (:mod:`moralkit.collect.runner`). With ``samples_per_request = k > 1`` the samples
``m0 .. m0+k-1`` of one (scenario, question form, ordering) are asked in **one** request with ``n = k``:
the prompt is sent and paid once, and the server returns ``k`` choices. The record keeps one row per
sample (``sample`` is its index, ``choice`` its position in the response, ``n`` the request's ``n``).

What changes for reproducibility: one seed per *request*, ``derive_seed(seed, "<scenario>|<form>|<ordering>|n<k>|<m0>", 1)``,
not one per sample, so the answers of a run with ``k > 1`` differ from those of a run with ``k = 1``
(both are draws of the same distribution), and the samples of one request are drawn together by
the server. A resumed request whose samples were only partly stored is re-sent unchanged (same
``n``, same seed) and only the missing samples are stored. The default, ``k = 1``, keeps the old
behaviour and the old answers.

:func:`moralkit.collect.batch.run_requests` is what the collectors call: a backend that runs whole
collections itself (the batch APIs) gets the tasks; ``k > 1`` online goes through
:func:`run_grouped_online`; everything else through :func:`moralkit.collect.runner.run_tasks`.

References
----------
Scherrer et al. (2023), Section 3.3 (M samples per question form at temperature 1).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ..errors import MoralkitError
from .backends import LENGTH_REASONS, MalformedResponse, Request, retry_delay, run_sync
from .runner import STOP, RunReport, Task, iso_time, stop_requested
from .store import derive_seed, prompt_sha256, utc_now

__all__ = ["Unit", "build_units", "store_result", "choices_from_json", "run_grouped_online",
           "task_done", "finish_report"]


@dataclass
class Unit:
    """One request: ``tasks`` are its sample slots (``n = len(tasks)``), all at attempt ``attempt``."""

    key: str
    tasks: list
    attempt: int
    request: Request

    @property
    def n(self) -> int:
        return len(self.tasks)

    def slots(self):
        return [(t.task, self.attempt) for t in self.tasks]


def task_done(store, t: Task, max_attempts: int) -> bool:
    att = store.attempts(t.task)
    return any(a.get("status") == "ok" for a in att) or len(att) >= max_attempts


def build_units(store, tasks, *, seed: int, sampling, max_attempts: int, groups=None, exclude=frozenset(),
                skip=frozenset()) -> list[Unit]:
    """The requests that still have to be sent for ``tasks``.

    ``groups``: ``[(key, [task ids])]``, tasks asked together with ``n = len(ids)`` (``max_attempts`` must
    be 1); tasks in no group are asked alone, exactly as :func:`~moralkit.collect.runner.run_tasks` asks
    them (same attempt numbers and seeds). ``exclude``: ``(task, attempt)`` slots held by a request in
    flight (a submitted batch); ``skip``: task ids not to ask in this session.
    """
    by_id = {t.task: t for t in tasks}
    group_ids = dict(groups or [])
    grouped = {}
    units = []
    for key, ids in (groups or []):
        if len(ids) > 1 and max_attempts != 1:
            raise MoralkitError("several samples per request need max_attempts=1 (MoralChoice)")
        for i in ids:
            grouped[i] = key
    seen_groups = set()
    for t in tasks:
        if t.task in skip:
            continue
        key = grouped.get(t.task)
        if key is None:
            if task_done(store, t, max_attempts):
                continue
            a = len(store.attempts(t.task)) + 1
            if (t.task, a) in exclude:
                continue
            rq = Request.from_prompt(t.prompt, system=t.system, seed=derive_seed(seed, t.task, a),
                                     sampling=t.sampling or sampling)
            units.append(Unit(t.task, [t], a, rq))
            continue
        if key in seen_groups:
            continue
        seen_groups.add(key)
        members = [by_id[i] for i in group_ids[key] if i in by_id]
        if all(store.has(m.task, 1) for m in members) or any((m.task, 1) in exclude for m in members):
            continue
        first = members[0]
        if any(m.prompt != first.prompt or m.system != first.system or m.sampling != first.sampling for m in members):
            raise MoralkitError(f"the samples of request {key!r} differ in prompt or sampling")
        rq = Request.from_prompt(first.prompt, system=first.system, seed=derive_seed(seed, key, 1),
                                 sampling=first.sampling or sampling)
        if len(members) > 1:
            rq = Request(messages=rq.messages, seed=rq.seed, sampling=rq.sampling, extra_body={"n": len(members)})
        units.append(Unit(key, members, 1, rq))
    return units


def choices_from_json(data, n: int = 1) -> tuple[list[str], list, dict]:
    """Texts and finish reasons of the ``n`` choices of a chat-completion body, in ``index`` order.

    A body with fewer than ``n`` usable choices is malformed (:class:`~moralkit.collect.backends.MalformedResponse`).

    Examples
    --------
    >>> choices_from_json({"choices": [{"index": 1, "message": {"content": "B"}}, {"index": 0, "message": {"content": "A"}}]}, 2)[0]
    ['A', 'B']
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise MalformedResponse("the body has no list of 'choices'")
    ch = [c for c in data["choices"] if isinstance(c, dict)]
    ch.sort(key=lambda c: c.get("index", 0) if isinstance(c.get("index", 0), int) else 0)
    if len(ch) < n:
        raise MalformedResponse(f"{len(ch)} choices for n={n}")
    texts, reasons = [], []
    for c in ch[:n]:
        msg = c.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise MalformedResponse("a choice has no message content")
        texts.append(msg["content"])
        reasons.append(c.get("finish_reason") if isinstance(c.get("finish_reason"), str) else None)
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}

    def _int(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    model = data.get("model")
    meta = dict(prompt_tokens=_int(u.get("prompt_tokens")), completion_tokens=_int(u.get("completion_tokens")),
                model=model if isinstance(model, str) else None)
    return texts, reasons, meta


def store_result(store, unit: Unit, parse, *, common: dict, texts=None, reasons=None, meta=None, error=None,
                 status_code=None, started: float = 0.0, latency_s: float = 0.0, extra: dict | None = None,
                 skip_errors=frozenset()) -> tuple[int, int]:
    """Write the records of one request's outcome: one ``attempt`` per sample slot not stored yet (parsed
    with ``parse``), or one ``error`` per slot. Idempotent: slots already stored are skipped, and so are
    error records whose ``(task, attempt)`` is in ``skip_errors``. Returns ``(attempts, errors)`` written.

    The fields are those of :func:`moralkit.collect.runner.run_tasks`' records, so exports do not depend
    on how an answer was requested; requests with ``n > 1`` add ``n`` and ``choice``, and carry their
    token counts on choice 0 only (the prompt was sent once).
    """
    meta = meta or {}
    n_att = n_err = 0
    rq = unit.request
    for j, t in enumerate(unit.tasks):
        if store.has(t.task, unit.attempt):
            continue
        base = dict(common, task=t.task, **t.fields, seed=rq.seed, prompt_sha256=prompt_sha256(rq.messages),
                    sampling=rq.sampling.to_dict(), started=iso_time(started), finished=utc_now(),
                    latency_s=round(float(latency_s), 4),
                    prompt_tokens=meta.get("prompt_tokens") if j == 0 else None,
                    completion_tokens=meta.get("completion_tokens") if j == 0 else None,
                    finish_reason=(reasons[j] if reasons else None), response_model=meta.get("model"))
        if unit.n > 1:
            base.update(n=unit.n, choice=j)
        base.update(extra or {})
        err = error
        if err is None:
            try:
                res = parse(t, texts[j])
                value, status = (res.value, res.status) if hasattr(res, "status") else res
                value = list(value) if isinstance(value, tuple) else value
            except Exception as e:  # a parser failure is this request's error
                err = f"ParseError {type(e).__name__}: {str(e)[:200]}"
        if err is not None:
            if (t.task, unit.attempt) in skip_errors:
                continue
            rec = dict(base, kind="error", attempt=unit.attempt, error=store.redact.error_text(err))
            if status_code is not None:
                rec["status_code"] = status_code
            store.append(rec)
            n_err += 1
            continue
        if status != "ok" and base.get("finish_reason") in LENGTH_REASONS and not (texts[j] or "").strip():
            status = "length"  # nothing to parse: the output budget ran out (as runner.run_tasks records it)
        store.append(dict(base, kind="attempt", attempt=unit.attempt, raw=texts[j], parsed=value, status=status))
        n_att += 1
    return n_att, n_err


def finish_report(store, tasks, max_attempts, rep: RunReport, failed: dict) -> RunReport:
    """Fill ``rep``'s totals (done, answered, undone with their last errors) from the store."""
    rep.tasks = len(tasks)
    rep.done = rep.answered = 0
    rep.undone = []
    for t in tasks:
        if task_done(store, t, max_attempts):
            rep.done += 1
            rep.answered += any(a.get("status") == "ok" for a in store.attempts(t.task))
        else:
            rep.undone.append(t.task)
    undone = set(rep.undone)
    rep.last_errors = {t: e for t, e in failed.items() if t in undone}
    return rep


def run_grouped_online(backend, store, tasks, parse, *, groups, seed: int, sampling, max_attempts: int = 1,
                       common: dict | None = None, bar=None, record_batch: bool = False, **_) -> RunReport:
    """Online requests with ``n`` samples each (``groups``), ``backend.concurrency`` in flight.

    Failures are recorded per slot as ``error`` records and the request is re-sent (same seed and ``n``)
    after :func:`~moralkit.collect.backends.retry_delay`, up to ``backend.max_retries`` times; a fatal
    status (401/403/404) stops the session.
    """
    if not hasattr(backend, "open_session"):
        raise MoralkitError("several samples per request need an API backend (openai): local models draw one "
                            "sample per request; use --samples-per-request 1")
    common = dict(common or {})
    for s in getattr(backend, "secrets", lambda: [])():
        store.redact.add(s)
    rep = RunReport()
    failed: dict = {}
    units = build_units(store, tasks, seed=seed, sampling=sampling, max_attempts=max_attempts, groups=groups)
    C = max(1, int(getattr(backend, "concurrency", 1) or 1))
    max_retries = int(getattr(backend, "max_retries", 6))
    backoff = float(getattr(backend, "backoff", 1.0))
    t0 = time.perf_counter()
    state = {"stopped": None}

    async def main():
        sem = asyncio.Semaphore(C)
        async with backend.open_session() as session:
            async def one(u: Unit):
                async with sem:
                    for k in range(max_retries + 1):
                        if STOP.is_set() and not state["stopped"]:
                            state["stopped"] = stop_requested()
                        if state["stopped"]:
                            return
                        c = await session.complete(u.request)
                        rep.sent += 0 if getattr(c, "cached", None) else 1
                        err, texts, reasons, meta = c.error, None, None, {}
                        if err is None:
                            try:
                                texts, reasons, meta = choices_from_json(c.data, u.n)
                            except MalformedResponse as e:
                                err = f"MalformedResponse: {e}"
                        extra = {"batch": u.n} if record_batch else {}
                        if getattr(c, "cached", None):
                            extra["cached"] = c.cached
                        a, e = store_result(store, u, parse, common=common, texts=texts, reasons=reasons, meta=meta,
                                            error=err, status_code=c.status_code, started=c.started,
                                            latency_s=c.latency_s, extra=extra)
                        rep.attempts += a
                        rep.errors += e
                        rep.busy_slot_seconds += c.latency_s
                        if err is None:
                            if bar is not None:
                                bar.update(u.n)
                            return
                        rep.error_types[err.split(":")[0].split(" ")[0]] += 1
                        for t in u.tasks:
                            failed[t.task] = err
                        if c.fatal:
                            state["stopped"] = f"request {u.key!r}: {err} (retrying cannot fix this)"
                            return
                        if k < max_retries:
                            await asyncio.sleep(retry_delay(k, c.retry_after, backoff))

            await asyncio.gather(*(one(u) for u in units))

    try:
        run_sync(main())
    finally:
        rep.wall_seconds = time.perf_counter() - t0
        rep.stopped = state["stopped"]
        finish_report(store, tasks, max_attempts, rep, failed)
    return rep
