"""A sweep file, read: parse the TOML, validate every key, expand models x surveys into jobs.

:func:`load_sweep` reads a sweep file (see :mod:`moralkit.collect.sweep` for the format) strictly, in
three phases: parse (:func:`parse_sweep_file`: TOML, top-level keys), validate (``[sweep]``,
``[providers.NAME]``, ``[[models]]``, ``[[surveys]]``: every error names the key and the fix) and expand
(:func:`expand_jobs`: one :class:`Job` per model x survey, with the run directory and the export it
writes, under the folders :func:`moralkit.runs.run_dir` names). :mod:`moralkit.collect.sweep` runs the
jobs and reports their status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, runs
from ..checks import check_choice
from ..errors import MoralkitError
from .runner import LABEL_RE

__all__ = ["Sweep", "Job", "load_sweep", "parse_sweep_file", "expand_jobs"]

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


def _choice(where, value, choices, name):
    """:func:`moralkit.checks.check_choice`, its message prefixed with where in the file the value is."""
    try:
        return check_choice(value, choices, name)
    except MoralkitError as e:
        raise MoralkitError(f"{where}: {e}") from None


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
    path = Path(path)
    raw = parse_sweep_file(path)
    sw = raw.get("sweep", {})
    _check_table(f"{path} [sweep]", sw, _SWEEP)
    providers = _validate_providers(path, raw.get("providers", {}))
    models = _validate_models(path, raw.get("models"), providers)
    surveys = _validate_surveys(path, raw.get("surveys"))
    wait, poll_interval = _waiting(path, sw, wait, poll_interval)
    sweep = Sweep(path=path, data=_data_folder(path, sw), seed=int(sw.get("seed", 0)), providers=providers,
                  models=models, surveys=surveys, progress=bool(sw.get("progress", True)),
                  batch=bool(sw.get("batch", False)) if batch is None else bool(batch),
                  wait=None if wait is None else float(wait), poll_interval=float(poll_interval))
    sweep.jobs = expand_jobs(sweep)
    return sweep


def parse_sweep_file(path) -> dict:
    """Phase 1: the sweep file's TOML as a dict, with only the top-level keys a sweep file has.

    Raises
    ------
    MoralkitError
        No such file, not valid TOML, or an unknown top-level key.
    """
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
    return raw


def _validate_providers(path, providers) -> dict:
    """Phase 2a: the ``[providers.NAME]`` tables (their limits)."""
    if not isinstance(providers, dict):
        _fail(path, "[providers] must be tables [providers.NAME]")
    for name, p in providers.items():
        _check_table(f"{path} [providers.{name}]", p, _PROVIDER)
        for k in ("concurrency", "rpm", "tpm"):
            if k in p and p[k] < 1:
                _fail(f"{path} [providers.{name}]", f"{k} must be >= 1, got {p[k]}")
    return providers


def _validate_models(path, models, providers) -> list:
    """Phase 2b: the ``[[models]]``: keys, backend, a file-name-safe label used once, prices, provider."""
    from .backends import BACKENDS

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
    return models


def _validate_surveys(path, surveys) -> list:
    """Phase 2c: the ``[[surveys]]``: a known survey, its keys, ambiguity, scenarios, question types, order."""
    if not isinstance(surveys, list) or not surveys:
        _fail(path, "no [[surveys]]: add at least one (survey = \"psm\", \"moralchoice\" or \"likelihood\")")
    for i, s in enumerate(surveys, 1):
        where = f"{path} [[surveys]] #{i}"
        if not isinstance(s, dict):
            _fail(where, f"must be a table with survey = \"psm\", \"moralchoice\" or \"likelihood\", got {s!r}")
        _choice(where, s.get("survey"), tuple(_SURVEY), "survey")
        _check_table(f"{where} ({s['survey']})", s, _SURVEY[s["survey"]], required=("survey",))
        if s["survey"] != "psm":
            _choice(where, s.get("ambiguity"), ("low", "high"), "ambiguity")
            if "scenarios" in s and "n_scenarios" in s:
                _fail(where, "give scenarios or n_scenarios, not both")
            bad = [q for q in s.get("question_types", []) if q not in ("ab", "repeat", "compare")]
            if bad:
                _fail(where, f"question_types {bad} unknown; choose from ab, repeat, compare")
        if s["survey"] == "psm":
            _choice(where, s.get("order", "paper"), ("paper", "shuffled"), "order")
        if s["survey"] == "moralchoice":
            _choice(where, s.get("order", "table"), ("table", "shuffled"), "order")
    return surveys


def _data_folder(path, sw) -> Path:
    """The data folder: ``[sweep] data`` (relative to the sweep file), else the project's
    (:func:`moralkit.paths.data_dir`, where :func:`moralkit.runs.run_dir` finds the committed runs)."""
    if "data" not in sw:
        return paths.data_dir()
    data = Path(sw["data"])
    return data if data.is_absolute() else (path.parent / data).resolve()


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
    """One job per model x survey it takes, its run directory and export under :func:`moralkit.runs.run_dir`'s
    folders of the sweep's data folder."""
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
                exp = runs.run_dir("psm", sweep.data) / (f"{label}.csv.gz" if seed == 0 else f"{label}-s{seed}.csv.gz")
            elif s["survey"] == "moralchoice":
                run = f"mc-{s['ambiguity']}-{label}-t{temp:g}-s{seed}"
                exp = runs.run_dir("responses", sweep.data) / f"{label}-{s['ambiguity']}.csv.gz"
            else:
                run = f"mcl-{s['ambiguity']}-{label}"
                exp = runs.run_dir("likelihoods", sweep.data) / f"{label}-{s['ambiguity']}.csv.gz"
            provider = m.get("provider", "") if m["backend"] != "transformers" else f"local:{m['backend']}"
            run_dir = runs.run_dir("raw", sweep.data) / run
            if s["survey"] == "likelihood" or m["backend"] not in _BATCH_BACKENDS:
                batch = False
            else:
                batch = bool(m.get("batch", s.get("batch", sweep.batch))) or _open_batches(run_dir)
            jobs.append(Job(label, sid, m, s, run_dir, exp, provider, seed, batch))
    return jobs


def expand_jobs(sweep: Sweep) -> list[Job]:
    """Phase 3: the jobs of a validated sweep, checked: batch jobs set no ``max_cost``, and no two jobs write
    the same run directory."""
    sweep.jobs = _jobs(sweep)
    _check_batch_jobs(sweep)
    dirs = [j.run_dir for j in sweep.jobs]
    if len(set(dirs)) != len(dirs):
        dup = next(d for d in dirs if dirs.count(d) > 1)
        _fail(sweep.path, f"two entries write the same run directory {dup}: make the surveys or labels differ")
    return sweep.jobs
