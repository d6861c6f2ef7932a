"""A panel of models x surveys from one TOML file: ``python -m moralkit sweep FILE``.

The papers surveyed panels of models (Seror 2025: Table 1's models; Scherrer et al. 2023: 28 models).
A *sweep file* lists the models and the surveys; :func:`run_sweep` administers every survey to every
model, resumably, and writes **the same run directories and exports as single runs**
(``<data>/raw/psm-<label>-t<T>-s<seed>``, ``<data>/psm/<label>.csv.gz``, ``<data>/raw/mc-<ambiguity>-<label>-t<T>-s<seed>``,
``<data>/moralchoice/<label>-<ambiguity>.csv.gz``, ``<data>/raw/mcl-<ambiguity>-<label>``,
``<data>/moralchoice_likelihood/<label>-<ambiguity>.csv.gz``), so every notebook reads the results unchanged.
Each provider gets its own worker thread and limits (concurrency, requests and tokens per minute): the
runs of one provider go one after the other, different providers at once.

Example::

    [sweep]
    data = "data"                 # holds raw/, psm/, moralchoice/ (default: the project's data/)
    seed = 0

    [providers.OpenAI]
    concurrency = 8
    rpm = 500
    tpm = 200000
    api_key_env = "OPENAI_API_KEY"

    [[models]]
    label = "gpt-5.4-mini"
    backend = "openai"
    model = "gpt-5.4-mini"
    provider = "OpenAI"
    max_cost = 20.0               # dollars per run (optional)
    parameters = { temperature = 1.0 }

    [[surveys]]
    survey = "psm"

    [[surveys]]
    survey = "moralchoice"
    ambiguity = "low"
    n_scenarios = 50              # or scenarios = [...]; default all; samples default: the paper's M

:func:`status_table` shows each model x survey: done / total, tokens, cost, errors, and the command that
resumes it (``python -m moralkit sweep FILE --status``).
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time

import pandas as pd

from ..errors import MoralkitError
from .runner import CollectionIncompleteError
from .sweep_file import Job, Sweep, load_sweep  # noqa: F401  (read here; importable from this module as before)

# Reading a sweep file (Sweep, Job, load_sweep: parse, validate, expand) lives in moralkit.collect.sweep_file.
__all__ = ["SweepIncompleteError", "run_sweep", "status_table", "status_markdown", "estimate_sweep",
           "estimate_sweep_table"]


class SweepIncompleteError(CollectionIncompleteError):
    """Jobs of a sweep ended incomplete (exit status 3); every completed record is saved."""

    def __init__(self, bad: pd.DataFrame, path, batch: bool = False):
        self.report = None
        cmd = f"python -m moralkit sweep {shlex.quote(str(path))}" + (" --batch" if batch else "")
        MoralkitError.__init__(
            self, f"INCOMPLETE sweep: {len(bad)} job(s) not done: "
            + "; ".join(f"{m}/{s} {d}/{n} ({st})" for m, s, d, n, st in
                        zip(bad["model"], bad["survey"], bad["done"], bad["total"], bad["state"]))
            + ". Completed records are saved" + (", submitted batches are recorded" if
                                                   (bad["state"] == "batch pending").any() else "")
            + f"; re-run `{cmd}` to resume.")


# --------------------------------------------------------------------------- running


def _make_backend(sweep: Sweep, job: Job):
    from .backends import make_backend
    from .cost import CostMeter, price_for

    m = job.model
    kw = dict(m.get("options", {}))
    if job.batch:
        from .batch import BatchBackend

        prov = dict(sweep.providers.get(m.get("provider", ""), {}))
        online = {k: v for k, v in kw.items() if k in ("max_tokens_param", "reasoning", "api_version")}
        try:
            return BatchBackend(m["backend"], m["model"], base_url=prov.get("base_url"),
                                api_key_env=prov.get("api_key_env"), wait=0, poll_interval=sweep.poll_interval,
                                max_retries=min(int(prov.get("max_retries", 3)), 3),
                                timeout=max(float(prov.get("timeout", 120.0)), 120.0), status=None,
                                send_seed=kw.get("send_seed", True), options=online)
        except TypeError as e:
            raise MoralkitError(f"{sweep.path} [[models]] {job.label}: options not accepted by the {m['backend']} "
                                f"batch backend ({e}); see moralkit.collect.batch") from None
    if m["backend"] != "transformers":
        prov = dict(sweep.providers.get(m.get("provider", ""), {}))
        tpm = prov.pop("tpm", None)
        kw = {**prov, **kw}
    else:
        tpm = None
    try:
        b = make_backend(m["backend"], m["model"], **kw)
    except TypeError as e:
        raise MoralkitError(f"{sweep.path} [[models]] {job.label}: options not accepted by the {m['backend']} "
                            f"backend ({e}); see moralkit.collect.backends") from None
    price = price_for(getattr(b, "remote_model", None) or m["model"], m.get("provider"),
                      price_in=m.get("price_in"), price_out=m.get("price_out")) \
        if (m["backend"] != "transformers" or "price_in" in m) else None
    b.cost_meter = CostMeter(price=price, max_cost=m.get("max_cost"), tpm=tpm)
    return b


def run_job(sweep: Sweep, job: Job, progress: bool = False):
    """Run (or resume) one model x survey; returns its report (``None`` for exact likelihoods)."""
    from .backends import Sampling, survey_max_tokens
    from .moralchoice import run_moralchoice
    from .psm import run_psm

    b = _make_backend(sweep, job)
    p, s = job.model.get("parameters", {}), job.spec
    job.export.parent.mkdir(parents=True, exist_ok=True)
    try:
        if s["survey"] == "psm":
            sampling = Sampling(temperature=float(p.get("temperature", 1.0)), top_p=float(p.get("top_p", 1.0)),
                                top_k=p.get("top_k"), max_tokens=int(p.get("max_tokens") or survey_max_tokens(b, 16)),
                                reasoning_effort=p.get("reasoning_effort"))
            _, rep = run_psm(b, job.run_dir, label=job.label, design_seed=s.get("design_seed", 0), seed=job.seed,
                             order=s.get("order", "paper"), sampling=sampling, system=p.get("system"),
                             max_attempts=s.get("attempts", 3), limit=s.get("limit"), progress=progress,
                             export=job.export, provider=job.model.get("provider") or None, return_report=True)
            return rep
        if s["survey"] == "moralchoice":
            sampling = Sampling(temperature=float(p.get("temperature", 1.0)), top_p=float(p.get("top_p", 1.0)),
                                top_k=p.get("top_k"), reasoning_effort=p.get("reasoning_effort"))
            _, rep = run_moralchoice(b, job.run_dir, ambiguity=s["ambiguity"], label=job.label,
                                     scenarios=s.get("scenarios"), n_scenarios=s.get("n_scenarios"),
                                     scenario_seed=s.get("scenario_seed", 0), samples=s.get("samples"),
                                     question_types=tuple(s["question_types"]) if s.get("question_types") else None,
                                     sampling=sampling, max_tokens=p.get("max_tokens"), seed=job.seed,
                                     order=s.get("order", "table"), progress=progress, export=job.export,
                                     provider=job.model.get("provider") or None, return_report=True)
            return rep
        from .likelihood_run import run_likelihood

        run_likelihood(b, job.run_dir, ambiguity=s["ambiguity"], label=job.label, scenarios=s.get("scenarios"),
                       n_scenarios=s.get("n_scenarios"), scenario_seed=s.get("scenario_seed", 0),
                       question_types=tuple(s["question_types"]) if s.get("question_types") else None,
                       progress=progress, export=job.export)
        return None
    finally:
        b.close()


def run_sweep(path, only=None, progress=None, out=sys.stdout, batch=None, wait=None, poll_interval=None) -> pd.DataFrame:
    """Run every job of a sweep file (or those named in ``only``: ``label/survey`` keys); resumable.

    One worker thread per provider runs that provider's online jobs one after the other, within its
    limits; local models share one worker. The batch jobs (``batch``: see :func:`load_sweep`) are
    submitted together by one more worker, which then polls all their batches every ``poll_interval``
    seconds, merges what has ended and submits what is due next (the PSM's rounds after round 0, invalid
    answers' next attempts, failed or expired requests), until every batch job is done or ``wait``
    seconds have passed. A job that ends incomplete (a request that kept failing, a budget reached,
    batches still running) is reported and the others go on. After each job, its status row is printed;
    at the end, the whole table (:func:`status_table`). A first SIGINT or SIGTERM (under
    :func:`moralkit.collect.runner.stop_on_signals`, as the command line runs it) stops every worker after
    the requests in flight are stored.

    Returns
    -------
    DataFrame
        The status table. Its ``state`` column says which jobs are incomplete.
    """
    from .cost import format_usd
    from .runner import STOP, CollectionIncompleteError, stop_requested
    from .store import RunLockedError

    sweep = load_sweep(path, batch=batch, wait=wait, poll_interval=poll_interval)
    jobs = [j for j in sweep.jobs if not only or j.key in set(only)]
    if only:
        unknown = set(only) - {j.key for j in sweep.jobs}
        if unknown:
            raise MoralkitError(f"--only {sorted(unknown)}: no such job; jobs are {', '.join(j.key for j in sweep.jobs)}")
    progress = sweep.progress if progress is None else progress
    groups: dict = {}
    for j in jobs:
        groups.setdefault("batch" if j.batch else j.provider, []).append(j)
    problems: dict = {}
    lock = threading.Lock()
    errors = (CollectionIncompleteError, RunLockedError, MoralkitError, RuntimeError, OSError)

    def report(j):
        with lock:
            row = status_table(sweep, [j], problems).iloc[0]
            print(f"[sweep] {j.key}: {row['state']}, {row['done']}/{row['total']} done, tokens "
                  f"{row['input_tokens']:,} in / {row['output_tokens']:,} out, cost {format_usd(row['cost_usd'])}"
                  + (f", batches: {row['batch']}" if row["batch"] else "")
                  + (f" -- {problems[j.key]}" if j.key in problems and not row["state"].startswith("incomplete")
                     else ""), file=out, flush=True)

    def worker(group):
        for j in group:
            if STOP.is_set():
                problems[j.key] = stop_requested()
                continue
            try:
                run_job(sweep, j, progress=progress)
            except errors as e:
                problems[j.key] = str(e).splitlines()[0][:500]
            report(j)

    def batch_worker(group):
        _batch_worker(sweep, group, problems, report, out, lock, errors)

    threads = [threading.Thread(target=batch_worker if p == "batch" else worker, args=(g,), name=f"sweep-{p}")
               for p, g in groups.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = status_table(sweep, jobs, problems)
    print(status_markdown(table), file=out, flush=True)
    return table


def _batch_worker(sweep, group, problems, report, out, lock, errors):
    """The batch jobs of :func:`run_sweep`: each pass submits what is due, polls once and merges what has
    ended, for every job; then waits ``poll_interval`` (a stop signal or ``wait`` ends the wait)."""
    from .batch import BatchPendingError, batch_state
    from .runner import STOP, stop_requested

    pending = list(group)
    deadline = None if sweep.wait is None else time.monotonic() + sweep.wait
    seen: dict = {}
    while pending:
        still = []
        for j in pending:
            if STOP.is_set():
                still.append(j)
                continue
            try:
                run_job(sweep, j)  # submits what is due, polls once, merges what has ended
                problems.pop(j.key, None)
                report(j)
            except BatchPendingError:
                still.append(j)
                text = batch_state(j.run_dir)["text"]
                if seen.get(j.key) != text.split(", age")[0]:  # a line when something changed
                    seen[j.key] = text.split(", age")[0]
                    with lock:
                        print(f"[sweep] {j.key}: waiting for batches: {text}", file=out, flush=True)
            except errors as e:
                problems[j.key] = str(e).splitlines()[0][:500]
                report(j)
        pending = still
        if not pending or STOP.is_set() or (deadline is not None and time.monotonic() >= deadline):
            break
        end = time.monotonic() + (sweep.poll_interval if deadline is None
                                  else min(sweep.poll_interval, max(0.0, deadline - time.monotonic())))
        while time.monotonic() < end and not STOP.is_set():
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))
    for j in pending:
        problems[j.key] = stop_requested() or "stopped waiting for its batches (--wait)"
        report(j)


# --------------------------------------------------------------------------- status


def _expected(job: Job) -> int:
    """Tasks of a job when it is complete (PSM: round 0 + rounds; MoralChoice: answers; likelihood: scenarios)."""
    import warnings

    s = job.spec
    if s["survey"] == "psm":
        return 1 + (160 if s.get("limit") is None else min(160, int(s["limit"])))
    from .. import moralchoice as mc
    from .moralchoice import DEFAULT_SAMPLES, select_scenarios

    if s.get("scenarios"):
        n = len(s["scenarios"])
    elif s.get("n_scenarios"):
        n = int(s["n_scenarios"])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = len(select_scenarios(mc.load_scenarios(s["ambiguity"])))
    if s["survey"] == "likelihood":
        return n
    M = s.get("samples") or DEFAULT_SAMPLES[s["ambiguity"]]
    return n * 2 * len(s.get("question_types") or mc.QUESTION_TYPES) * M


def _done(job: Job, att) -> int:
    s = job.spec
    if s["survey"] == "psm":
        by: dict = {}
        for a in att:
            by.setdefault(a["task"], []).append(a)
        mx = int(s.get("attempts", 3))
        return sum(1 for v in by.values() if any(a.get("status") == "ok" for a in v) or len(v) >= mx)
    if s["survey"] == "likelihood":
        return len({a["task"] for a in att})
    return len({a["task"] for a in att})


def status_table(sweep, jobs=None, problems=None) -> pd.DataFrame:
    """One row per model x survey: run directory, mode (online / batch), state (``done``, ``not started``,
    ``incomplete``, ``batch pending``), done / total, tokens, cost, errors, batch state (submissions, the
    open batches with their requests and age) and the command that resumes the job."""
    from .batch import batch_state
    from .cost import price_for, records_usage
    from .store import read_records

    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    problems = problems or {}
    rows = []
    for j in (sweep.jobs if jobs is None else jobs):
        recs = read_records(j.run_dir) if (j.run_dir / "manifest.json").exists() else []
        att = [r for r in recs if r.get("kind", "attempt") == "attempt"]
        total = _expected(j)
        done = min(_done(j, att), total)
        tin, tout, _ = records_usage(recs)
        m = j.model
        price = price_for(m["model"], m.get("provider"), price_in=m.get("price_in"), price_out=m.get("price_out")) \
            if (m["backend"] != "transformers" or "price_in" in m) else None
        bs = batch_state(j.run_dir)
        state = "done" if done >= total else ("not started" if not recs and not bs["submissions"] else "incomplete")
        if state != "done" and bs["open"]:
            state = "batch pending"
        if j.key in problems and state not in ("done", "batch pending"):
            state = "incomplete: " + problems[j.key]
        cmd = ["python", "-m", "moralkit", "sweep", str(sweep.path), "--only", j.key] + (["--batch"] if j.batch else [])
        rows.append(dict(model=j.label, survey=j.survey, run=j.run_dir.name, mode="batch" if j.batch else "online",
                         state=state, done=done, total=total, input_tokens=tin, output_tokens=tout,
                         cost_usd=float("nan") if price is None else _cost(price, recs),
                         errors=sum(1 for r in recs if r.get("kind") == "error"),
                         batch=bs["text"], command=" ".join(shlex.quote(x) for x in cmd)))
    return pd.DataFrame(rows)


def _cost(price, recs) -> float:
    """Dollars of a run's records: answers that came through a batch (``batch_submission``) at the batch price,
    the others at the online price."""
    from .cost import records_usage

    b = [r for r in recs if r.get("batch_submission")]
    o = [r for r in recs if not r.get("batch_submission")]
    bi, bo, _ = records_usage(b)
    oi, oo, _ = records_usage(o)
    return price.cost(oi, oo) + price.cost(bi, bo, batch=True)


def status_markdown(table) -> str:
    """The status table (a :func:`status_table`, or a sweep file's) as Markdown (``moralkit sweep FILE --status``)."""
    from .cost import markdown_table

    t = (table if isinstance(table, pd.DataFrame) else status_table(table)).copy()
    t["done"] = [f"{d}/{n}" for d, n in zip(t["done"], t["total"])]
    t["command"] = "`" + t["command"] + "`"
    return markdown_table(t.drop(columns="total"))


def estimate_sweep(path, output_tokens=None) -> str:
    """``moralkit estimate --sweep FILE``: per model x survey, requests, tokens and cost online and in batch."""
    from .cost import format_usd, markdown_table

    df = estimate_sweep_table(path, output_tokens)
    total = (f"\n\nTotal: {int(df['requests'].sum()):,} requests, {int(df['input_tokens'].sum()):,} input and "
             f"{int(df['output_tokens'].sum()):,} output tokens; online {format_usd(df['cost_online'].sum(min_count=1))}, "
             f"batch {format_usd(df['cost_batch'].sum(min_count=1))}.") if len(df) else ""
    return markdown_table(df) + total


def estimate_sweep_table(path, output_tokens=None) -> pd.DataFrame:
    """The rows of :func:`estimate_sweep`: model, survey, requests, input and output tokens, cost online,
    in batch, and in batch with ``n = M``."""
    from .cost import TokenCounter, counter_for, estimate_table, price_for, survey_parts

    sweep = load_sweep(path)
    rows, counters = [], {}
    for j in sweep.jobs:
        m, s = j.model, j.spec
        if s["survey"] == "likelihood":
            continue  # scored, not sampled: one request per scenario, no price
        if m["model"] not in counters:
            counters[m["model"]] = counter_for(m["model"], m["backend"]) if m["backend"] == "transformers" \
                else TokenCounter()
        kw = dict(system=m.get("parameters", {}).get("system"), limit=s.get("limit")) if s["survey"] == "psm" else dict(
            ambiguity=s["ambiguity"], scenarios=s.get("scenarios"), n_scenarios=s.get("n_scenarios"),
            scenario_seed=s.get("scenario_seed", 0), samples=s.get("samples"),
            question_types=tuple(s["question_types"]) if s.get("question_types") else None,
            max_tokens=m.get("parameters", {}).get("max_tokens"))
        parts = survey_parts("psm" if s["survey"] == "psm" else "moralchoice", counters[m["model"]],
                             output_tokens=output_tokens, **kw)
        price = price_for(m["model"], m.get("provider"), price_in=m.get("price_in"), price_out=m.get("price_out")) \
            if (m["backend"] != "transformers" or "price_in" in m) else None
        t = estimate_table(parts, price).set_index("mode")
        rows.append(dict(model=j.label, survey=j.survey, requests=int(t.loc["online", "requests"]),
                         input_tokens=int(t.loc["online", "input_tokens"]),
                         output_tokens=int(t.loc["online", "output_tokens"]),
                         cost_online=t.loc["online", "cost_usd"], cost_batch=t.loc["batch", "cost_usd"],
                         cost_batch_n=t.loc["batch + n=M", "cost_usd"]))
    return pd.DataFrame(rows)


def sweep_summary_json(path) -> str:
    """The status table as JSON records (for scripts)."""
    return json.dumps(status_table(path).to_dict(orient="records"), indent=1)
