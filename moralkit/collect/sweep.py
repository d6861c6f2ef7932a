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
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import MoralkitError
from .runner import LABEL_RE, CollectionIncompleteError

__all__ = ["SweepIncompleteError", "Sweep", "Job", "load_sweep", "run_sweep", "status_table", "status_markdown", "estimate_sweep",
           "estimate_sweep_table"]

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_TOP = {"sweep", "providers", "models", "surveys"}
_SWEEP = {"data": str, "seed": int, "progress": bool, "batch": bool, "wait": (int, float),
          "poll_interval": (int, float)}
_PROVIDER = {"concurrency": int, "rpm": int, "tpm": int, "base_url": str, "api_key_env": str, "timeout": (int, float),
             "max_retries": int, "backoff": (int, float)}
_MODEL = {"label": str, "backend": str, "model": str, "provider": str, "parameters": dict, "options": dict,
          "max_cost": (int, float), "price_in": (int, float), "price_out": (int, float), "surveys": list,
          "batch": bool}
_PARAMS = {"temperature": (int, float), "top_p": (int, float), "top_k": int, "max_tokens": int, "system": str,
           "reasoning_effort": str}
_SURVEY = {
    "psm": {"survey": str, "design_seed": int, "order": str, "limit": int, "attempts": int, "batch": bool},
    "moralchoice": {"survey": str, "ambiguity": str, "scenarios": list, "n_scenarios": int, "scenario_seed": int,
                    "samples": int, "question_types": list, "order": str, "batch": bool},
    "likelihood": {"survey": str, "ambiguity": str, "scenarios": list, "n_scenarios": int, "scenario_seed": int,
                   "question_types": list},
}


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


def _fail(where, msg):
    raise MoralkitError(f"{where}: {msg}")


def _check_table(where, table, allowed, required=()):
    if not isinstance(table, dict):
        _fail(where, f"must be a table, got {type(table).__name__}")
    for k, v in table.items():
        if k not in allowed:
            _fail(where, f"unknown key {k!r}; allowed keys: {', '.join(sorted(allowed))}")
        t = allowed[k]
        types = t if isinstance(t, tuple) else (t,)
        if (isinstance(v, bool) and bool not in types) or not isinstance(v, t):
            _fail(where, f"{k} must be {_tname(t)}, got {v!r}")
    for k in required:
        if k not in table:
            _fail(where, f"missing key {k!r}")


def _tname(t):
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "a table",
             list: "a list"}
    return " or ".join(names[x] for x in (t if isinstance(t, tuple) else (t,)))


@dataclass
class Job:
    """One model x survey of a sweep: its run directory, export and arguments."""

    label: str
    survey: str  # "psm", "moralchoice-low", "likelihood-high", ...
    model: dict
    spec: dict
    run_dir: Path
    export: Path
    provider: str
    seed: int
    batch: bool = False  # through the provider's batch API (moralkit.collect.batch)

    @property
    def key(self) -> str:
        return f"{self.label}/{self.survey}"


@dataclass
class Sweep:
    """A validated sweep file: providers' limits, models and surveys, and the jobs they make."""

    path: Path
    data: Path
    seed: int
    providers: dict
    models: list
    surveys: list
    progress: bool = True
    jobs: list = field(default_factory=list)
    batch: bool = False  # [sweep] batch, or --batch
    wait: float | None = None  # seconds to wait for batches (None: until they end)
    poll_interval: float = 30.0


def load_sweep(path, batch: bool | None = None, wait: float | None = None, poll_interval: float | None = None) -> Sweep:
    """Read and validate a sweep file strictly: every error names the key and the fix.

    ``batch``, ``wait`` and ``poll_interval`` (the command line's ``--batch``, ``--wait``,
    ``--poll-interval``) override ``[sweep]``'s. Which jobs go through a batch API: a model's ``batch``
    if it sets one, else its survey's, else the sweep's; a sweep- or survey-wide ``batch`` applies to the
    ``openai`` and ``anthropic`` backends only (the others have no batch API and run online). A job whose
    run directory still has batch submissions open runs in batch mode whatever the file says: sending
    those requests online would pay for them twice.

    Raises
    ------
    MoralkitError
        An unknown key, a wrong type, a missing required key, an unknown backend or survey, a label that
        is not file-name safe, or two entries that would write the same run directory.
    """
    from .backends import BACKENDS

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise MoralkitError(f"{path}: no such sweep file") from None
    except tomllib.TOMLDecodeError as e:
        raise MoralkitError(f"{path}: not valid TOML ({e})") from None
    for k in raw:
        if k not in _TOP:
            _fail(path, f"unknown top-level key {k!r}; a sweep file has [sweep], [providers.NAME], [[models]] "
                        "and [[surveys]]")
    sw = raw.get("sweep", {})
    _check_table(f"{path} [sweep]", sw, _SWEEP)
    providers = raw.get("providers", {})
    if not isinstance(providers, dict):
        _fail(path, "[providers] must be tables [providers.NAME]")
    for name, p in providers.items():
        _check_table(f"{path} [providers.{name}]", p, _PROVIDER)
        for k in ("concurrency", "rpm", "tpm"):
            if k in p and p[k] < 1:
                _fail(f"{path} [providers.{name}]", f"{k} must be >= 1, got {p[k]}")
    models = raw.get("models")
    if not isinstance(models, list) or not models:
        _fail(path, "no [[models]]: add at least one, with backend, model (and label, provider)")
    labels = set()
    for i, m in enumerate(models, 1):
        where = f"{path} [[models]] #{i}" + (f" ({m.get('label') or m.get('model')})" if isinstance(m, dict) else "")
        _check_table(where, m, _MODEL, required=("backend", "model"))
        if m["backend"] not in BACKENDS:
            _fail(where, f"backend {m['backend']!r} is unknown; use one of {', '.join(sorted(BACKENDS))}")
        m.setdefault("label", m["model"])
        if not LABEL_RE.match(m["label"]):
            _fail(where, f"label {m['label']!r} must be file-name safe (letters, digits, . _ @ + -); set label = ...")
        if m["label"] in labels:
            _fail(where, f"label {m['label']!r} is used twice; give each model its own label")
        labels.add(m["label"])
        _check_table(f"{where} parameters", m.get("parameters", {}), _PARAMS)
        if m.get("batch") and m["backend"] not in _BATCH_BACKENDS:
            _fail(where, f"batch = true needs backend openai or anthropic (the {m['backend']} backend has no batch "
                         "API); remove it")
        if ("price_in" in m) != ("price_out" in m):
            _fail(where, "give both price_in and price_out (dollars per million tokens), or neither")
        prov = m.get("provider", "")
        if m["backend"] != "transformers" and prov and providers and prov not in providers:
            _fail(where, f"provider {prov!r} has no [providers.{prov}] table; add one (its limits) or fix the name")
    surveys = raw.get("surveys")
    if not isinstance(surveys, list) or not surveys:
        _fail(path, "no [[surveys]]: add at least one (survey = \"psm\", \"moralchoice\" or \"likelihood\")")
    for i, s in enumerate(surveys, 1):
        where = f"{path} [[surveys]] #{i}"
        if not isinstance(s, dict) or s.get("survey") not in _SURVEY:
            _fail(where, f"survey must be one of {', '.join(_SURVEY)}, got {s.get('survey') if isinstance(s, dict) else s!r}")
        _check_table(f"{where} ({s['survey']})", s, _SURVEY[s["survey"]], required=("survey",))
        if s["survey"] != "psm":
            if s.get("ambiguity") not in ("low", "high"):
                _fail(where, f"ambiguity must be \"low\" or \"high\", got {s.get('ambiguity')!r}")
            if "scenarios" in s and "n_scenarios" in s:
                _fail(where, "give scenarios or n_scenarios, not both")
            bad = [q for q in s.get("question_types", []) if q not in ("ab", "repeat", "compare")]
            if bad:
                _fail(where, f"question_types {bad} unknown; choose from ab, repeat, compare")
        if s["survey"] == "psm" and s.get("order", "paper") not in ("paper", "shuffled"):
            _fail(where, f"order must be \"paper\" or \"shuffled\", got {s['order']!r}")
        if s["survey"] == "moralchoice" and s.get("order", "table") not in ("table", "shuffled"):
            _fail(where, f"order must be \"table\" or \"shuffled\", got {s['order']!r}")
    from .. import paths

    data = Path(sw["data"]) if "data" in sw else paths.data_dir()
    if not data.is_absolute() and "data" in sw:
        data = (path.parent / data).resolve()
    wait, poll_interval = _waiting(path, sw, wait, poll_interval)
    sweep = Sweep(path=path, data=data, seed=int(sw.get("seed", 0)), providers=providers, models=models,
                  surveys=surveys, progress=bool(sw.get("progress", True)),
                  batch=bool(sw.get("batch", False)) if batch is None else bool(batch),
                  wait=None if wait is None else float(wait), poll_interval=float(poll_interval))
    sweep.jobs = _jobs(sweep)
    _check_batch_jobs(sweep)
    dirs = [j.run_dir for j in sweep.jobs]
    if len(set(dirs)) != len(dirs):
        dup = next(d for d in dirs if dirs.count(d) > 1)
        _fail(path, f"two entries write the same run directory {dup}: make the surveys or labels differ")
    return sweep


#: Backends with a batch API (moralkit.collect.batch).
_BATCH_BACKENDS = ("openai", "anthropic")


def _open_batches(run_dir) -> bool:
    from .batch import batch_state

    return batch_state(run_dir)["open"] > 0


def _waiting(path, sw, wait, poll_interval):
    """``(wait, poll_interval)`` for batch jobs: the command line's, else ``[sweep]``'s, checked."""
    if wait is None and "wait" in sw:
        wait = sw["wait"]
    if poll_interval is None:
        poll_interval = sw.get("poll_interval", 30.0)
    if wait is not None and not float(wait) >= 0:
        _fail(f"{path} [sweep]", f"wait must be >= 0 seconds, got {wait}")
    if not float(poll_interval) > 0:
        _fail(f"{path} [sweep]", f"poll_interval must be > 0 seconds, got {poll_interval}")
    return wait, poll_interval


def _check_batch_jobs(sweep) -> None:
    for j in sweep.jobs:
        if j.batch and "max_cost" in j.model:
            _fail(f"{sweep.path} [[models]] {j.label}", "max_cost is not enforced in batch mode (a batch is paid "
                  "when it runs); check the cost first with `python -m moralkit estimate --sweep FILE`, then "
                  "remove max_cost or set batch = false for this model")


def _survey_id(s) -> str:
    return "psm" if s["survey"] == "psm" else f"{s['survey']}-{s['ambiguity']}"


def _jobs(sweep) -> list[Job]:
    jobs = []
    for m in sweep.models:
        params = m.get("parameters", {})
        temp = float(params.get("temperature", 1.0))
        wanted = m.get("surveys")
        for s in sweep.surveys:
            sid = _survey_id(s)
            if wanted is not None and sid not in wanted and s["survey"] not in wanted:
                continue
            label, seed = m["label"], sweep.seed
            if s["survey"] == "psm":
                run = f"psm-{label}-t{temp:g}-s{seed}"
                exp = sweep.data / "psm" / (f"{label}.csv.gz" if seed == 0 else f"{label}-s{seed}.csv.gz")
            elif s["survey"] == "moralchoice":
                run = f"mc-{s['ambiguity']}-{label}-t{temp:g}-s{seed}"
                exp = sweep.data / "moralchoice" / f"{label}-{s['ambiguity']}.csv.gz"
            else:
                run = f"mcl-{s['ambiguity']}-{label}"
                exp = sweep.data / "moralchoice_likelihood" / f"{label}-{s['ambiguity']}.csv.gz"
            provider = m.get("provider", "") if m["backend"] != "transformers" else f"local:{m['backend']}"
            run_dir = sweep.data / "raw" / run
            if s["survey"] == "likelihood" or m["backend"] not in _BATCH_BACKENDS:
                batch = False
            else:
                batch = bool(m.get("batch", s.get("batch", sweep.batch))) or _open_batches(run_dir)
            jobs.append(Job(label, sid, m, s, run_dir, exp, provider, seed, batch))
    return jobs


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
