"""Administer MoralChoice to an LLM and export the answers in the survey's response layout.

Protocol (Scherrer et al. 2023, Section 3.3 and Appendix B), as implemented by
:func:`run_moralchoice`:

- six question forms per scenario: the three templates ``ab``, ``repeat``,
  ``compare`` (Table 12) times the two orderings of the actions;
- the template's instruction header (Table 13) as the system message (or
  prepended to the question with ``header="prepend"``), the question as the user
  message, one question per fresh chat (context reset);
- ``M`` samples per form at temperature 1 (paper: ``M = 5`` for low-, ``M = 10``
  for high-ambiguity scenarios; configurable);
- every answer mapped with :func:`moralkit.moralchoice.map_answer` to
  ``action1``, ``action2``, ``refusal`` or ``invalid``.

Prompts come from :func:`moralkit.moralchoice.build_prompt` and scenarios from
:func:`moralkit.moralchoice.load_scenarios` (this module writes none of its own).
One request per (scenario, form, sample); there are no retries (invalid answers
are part of the estimand's denominator handling, Section 3.3).

References
----------
Scherrer, N., Shi, C., Feder, A., Blei, D. (2023). *Evaluating the Moral Beliefs
Encoded in LLMs*, Section 3.3 and Appendix B (Tables 12-13, B.2).
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomicfile import atomic_path
from ..checks import check_choice, check_int
from ..errors import DataError, MoralkitError
from ..moralchoice.data import PAPER_SAMPLES
from ..moralchoice.responses import RESPONSE_COLUMNS
from .backends import REASONING_MAX_TOKENS, Backend, Sampling, check_sampling
from .batch import run_requests
from .runner import Task, check_label, incomplete_error
from .store import (
    RecordStore,
    distinct_runs,
    git_commit,
    package_versions,
    provider_of,
    read_records,
    session_info,
    utc_now,
)

__all__ = ["run_moralchoice", "MoralChoiceSpec", "MoralChoicePlan", "moralchoice_frame", "export_moralchoice", "moralchoice_quality",
           "select_scenarios", "DEFAULT_SAMPLES", "DEFAULT_MAX_TOKENS", "MC_IDENTITY"]

#: Samples per question form in the paper (Section 3.3).
DEFAULT_SAMPLES = {**PAPER_SAMPLES, "controversial": 10}

#: New-token caps per question type (the paper does not give one; "repeat" must echo a sentence).
DEFAULT_MAX_TOKENS = {"ab": 8, "compare": 8, "repeat": 48}

#: How the completeness line names MoralChoice tasks, valid answers and the others.
MC_LINE = ("answers", "mapped to an action", "refusal or invalid")


def select_scenarios(scenarios: pd.DataFrame, ids=None, n=None, seed: int = 0) -> pd.DataFrame:
    """A subset of a scenario table: given ``ids`` (in that order), a seeded random ``n``
    (kept in table order), or all rows."""
    if ids is not None and n is not None:
        raise MoralkitError("pass either scenario ids or n_scenarios, not both")
    if ids is not None:
        ids = list(ids)
        known = set(scenarios["scenario_id"])
        bad = [i for i in ids if i not in known]
        if bad:
            raise MoralkitError(f"unknown scenario ids {bad[:5]} (of {len(bad)}); see load_scenarios()")
        return scenarios.set_index("scenario_id").loc[ids].reset_index()
    if n is not None:
        n = check_int(n, "n_scenarios", minimum=1, maximum=len(scenarios))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3_2023]))
        idx = np.sort(rng.choice(len(scenarios), size=n, replace=False))
        return scenarios.iloc[idx].reset_index(drop=True)
    return scenarios.reset_index(drop=True)


def _task_id(sid, qt, o, m):
    return f"{sid}|{qt}|{o}|{m}"


@dataclass(frozen=True, kw_only=True)
class MoralChoiceSpec:
    """What a MoralChoice run asks of its respondent: the run's identity, exactly as its manifest records it.

    A run directory holds one spec; resuming or extending it with another is refused (the record store
    compares :data:`MC_IDENTITY`, the names of these fields, with the stored manifest). Build one for a
    backend with :meth:`for_backend`, which checks every value.

    Attributes
    ----------
    label, backend, model : str
        The respondent's label and the backend's name and model.
    ambiguity : {"low", "high", "controversial"}
    seed : int
        Run seed (a seed per request is derived from it).
    sampling : dict
        :meth:`Sampling.to_dict <moralkit.collect.backends.Sampling.to_dict>` with ``max_tokens`` a dict per
        question type.
    header : {"system", "prepend"}
    system : None
        MoralChoice uses the templates' instruction headers (always None; kept in the identity).
    survey : str
        ``"moralchoice"``.
    """

    survey: str = "moralchoice"
    label: str
    backend: str
    model: str
    ambiguity: str = "high"
    seed: int = 0
    sampling: dict = field(default_factory=dict, compare=True)
    header: str = "system"
    system: None = None

    @classmethod
    def for_backend(cls, backend: Backend, *, ambiguity: str = "high", label=None, sampling: Sampling | None = None,
                    max_tokens=None, seed: int = 0, header: str = "system", system=None) -> "MoralChoiceSpec":
        """The spec of a run of ``backend`` (defaults as :func:`run_moralchoice`), checked; refused sampling
        raises before any run directory is touched."""
        if system is not None:
            raise MoralkitError("MoralChoice uses the templates' instruction headers; pass header='system' or "
                                "'prepend' (not a system message)")
        check_choice(header, ("system", "prepend"), "header")
        label = label or backend.model
        check_label(label)
        sampling = sampling or Sampling(temperature=1.0, top_p=1.0)
        check_sampling(backend, sampling)
        mt = dict(DEFAULT_MAX_TOKENS)
        if getattr(backend, "reasoning", False):
            mt = {q: REASONING_MAX_TOKENS for q in mt}
        if isinstance(max_tokens, dict):
            mt.update(max_tokens)
        elif max_tokens is not None:
            mt = {q: int(max_tokens) for q in mt}
        return cls(label=label, backend=backend.name, model=backend.model, ambiguity=ambiguity, seed=int(seed),
                   sampling={**sampling.to_dict(), "max_tokens": mt}, header=header, system=None)

    def identity(self) -> dict:
        """The manifest's identity fields (:data:`MC_IDENTITY`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def sampling_for(self, question_type: str) -> Sampling:
        """The sampling of one question type (its own token cap)."""
        return Sampling(**{**self.sampling, "max_tokens": self.sampling["max_tokens"][question_type]})


#: The manifest keys that identify a MoralChoice run: the fields of :class:`MoralChoiceSpec`.
MC_IDENTITY = tuple(f.name for f in fields(MoralChoiceSpec))


@dataclass(frozen=True, kw_only=True)
class MoralChoicePlan:
    """What one session administers: not part of the run's identity (a run can be extended with more
    scenarios or samples, or continued in another order). The fields are :func:`run_moralchoice`'s options
    of the same names."""

    scenarios: tuple | None = None
    n_scenarios: int | None = None
    scenario_seed: int = 0
    samples: int | None = None
    question_types: tuple | None = None
    order: str = "table"
    limit: int | None = None
    source: object = None
    provider: str | None = None
    samples_per_request: int = 1

    def checked(self, ambiguity: str) -> "MoralChoicePlan":
        """The plan with ``samples`` (M) and ``question_types`` resolved, every value checked."""
        from .. import moralchoice as mc

        qts = tuple(self.question_types) if self.question_types else tuple(mc.QUESTION_TYPES)
        bad = [q for q in qts if q not in mc.QUESTION_TYPES]
        if bad:
            raise MoralkitError(f"unknown question types {bad}; choose from {mc.QUESTION_TYPES}")
        M = check_int(DEFAULT_SAMPLES.get(ambiguity, 5) if self.samples is None else self.samples, "samples",
                      minimum=1)
        k = check_int(self.samples_per_request, "samples_per_request", minimum=1)
        check_choice(self.order, ("table", "shuffled"), "order")
        limit = None if self.limit is None else check_int(self.limit, "limit", minimum=0)
        return replace(self, samples=M, question_types=qts, samples_per_request=k, limit=limit)


_SPEC_OPTIONS = ("ambiguity", "label", "sampling", "max_tokens", "seed", "header", "system")
_PLAN_OPTIONS = tuple(f.name for f in fields(MoralChoicePlan))


def run_moralchoice(backend: Backend, run_dir, spec: MoralChoiceSpec | None = None,
                    plan: MoralChoicePlan | None = None, *, progress: bool = True, export=None,
                    return_report: bool = False, **options) -> pd.DataFrame:
    """Administer MoralChoice (six forms x ``samples``) and return the answers in the response layout.

    Parameters
    ----------
    backend : Backend
    run_dir : path-like
        Run directory (records + manifest); re-running resumes. One ambiguity level per run.
    spec : MoralChoiceSpec, optional
        The run's identity; default :meth:`MoralChoiceSpec.for_backend` of the options below.
    plan : MoralChoicePlan, optional
        What this session administers; default from the options below.
    progress : bool
    export : path-like, optional
        Also write the response file (:func:`export_moralchoice`) there.
    return_report : bool, default False
        Also return the session's :class:`~moralkit.collect.runner.RunReport`.
    **options
        The fields of the spec (with ``spec=None``) and of the plan (with ``plan=None``), by name:

        - ``ambiguity`` ({"low", "high", "controversial"}, default "high"); ``label`` (model label,
          ``model_id`` is ``"<backend>/<label>"``);
        - ``sampling`` (:class:`~moralkit.collect.backends.Sampling`, default temperature 1, top-p 1, Section
          3.3; its ``max_tokens`` is replaced per question type by ``max_tokens`` (dict or int) or
          :data:`DEFAULT_MAX_TOKENS`, :data:`~moralkit.collect.backends.REASONING_MAX_TOKENS` for a reasoning
          model, whose hidden reasoning counts against it); ``seed`` (run seed, default 0);
          ``header`` ("system": the template's instruction header as the system message; "prepend": before
          the question in one user message); ``system`` (must be None);
        - ``scenarios`` (ids) or ``n_scenarios`` (a seeded random subset, ``scenario_seed``), default all;
          ``samples`` (M per form, default 5 low, 10 high); ``question_types`` (subset of ``("ab", "repeat",
          "compare")``); ``source`` (the survey files);
        - ``order`` ("table" or "shuffled": the order in which scenarios are administered; the survey table is
          grouped by rule, so a run stopped early in table order covers a few rules only, in shuffled order a
          random subset of complete scenarios; not part of the identity: when the M samples of a scenario fill
          at least one batch, ``2 M >= batch size``, the order changes no answer); ``limit`` (complete at most
          this many scenarios that still have undone requests in this session);
        - ``provider`` (the organisation that publishes the model, the ``provider`` column, as in
          :func:`moralkit.collect.run_psm`; set when the run directory is created);
          ``samples_per_request`` (ask ``k`` of the ``M`` samples of a form in one request, OpenAI-style
          ``n = k``: one seed per request instead of one per sample, :mod:`moralkit.collect.units`; default 1,
          one request per sample, with the same answers as before).

    Returns
    -------
    DataFrame
        Columns of :data:`RESPONSE_COLUMNS` (the shared response files' layout); with
        ``return_report``, ``(frame, report)``.

    Raises
    ------
    CollectionIncompleteError, CollectionRefusedError
        Answers are left undone (requests that kept failing; saved, re-running resumes), or a response no
        retry can fix (HTTP 401, 403, 404) stopped the session; the message names them and the server's
        (redacted) last message.

    References
    ----------
    Scherrer et al. (2023), Section 3.3, Appendix B.
    """
    from .. import moralchoice as mc

    spec, plan = _spec_and_plan(backend, spec, plan, options)
    table = mc.load_scenarios(spec.ambiguity, source=plan.source)
    chosen = select_scenarios(table, plan.scenarios, plan.n_scenarios, plan.scenario_seed)
    templates = mc.load_templates(plan.source)
    store = _open_store(backend, run_dir, spec, plan, len(chosen))
    common = dict(run=Path(run_dir).name, survey="moralchoice", label=spec.label, backend=spec.backend,
                  model=spec.model, ambiguity=spec.ambiguity)
    tasks = _schedule(_form_tasks(spec, plan, chosen, templates), spec, plan, store, len(chosen),
                      max(1, int(getattr(backend, "batch_size", 1))))
    groups = _request_groups(tasks, plan.samples_per_request, plan.samples)
    report = _collect(backend, store, tasks, groups, spec, templates, common, progress)
    df = moralchoice_frame(run_dir)
    if export is not None:
        _write(df, export)
    if not report.complete:
        raise incomplete_error(report, *MC_LINE)
    return (df, report) if return_report else df


def _spec_and_plan(backend, spec, plan, options):
    """Phase 1: the run's spec and the session's plan, from the objects or the keyword options, checked."""
    unknown = sorted(set(options) - set(_SPEC_OPTIONS) - set(_PLAN_OPTIONS))
    if unknown:
        raise MoralkitError(f"run_moralchoice got unknown options {unknown}; it takes {list(_SPEC_OPTIONS)} "
                            f"(or spec=MoralChoiceSpec) and {list(_PLAN_OPTIONS)} (or plan=MoralChoicePlan)")
    spec_kw = {k: v for k, v in options.items() if k in _SPEC_OPTIONS}
    plan_kw = {k: v for k, v in options.items() if k in _PLAN_OPTIONS}
    if spec is not None and spec_kw:
        raise MoralkitError(f"give the run's identity either as spec= or as options, not both ({sorted(spec_kw)})")
    if plan is not None and plan_kw:
        raise MoralkitError(f"give the session either as plan= or as options, not both ({sorted(plan_kw)})")
    if spec is None:
        spec = MoralChoiceSpec.for_backend(backend, **spec_kw)
    elif (spec.backend, spec.model) != (backend.name, backend.model):
        raise MoralkitError(f"the spec is for {spec.backend}/{spec.model}, the backend is {backend.name}/"
                            f"{backend.model}")
    plan = (plan or MoralChoicePlan(**plan_kw)).checked(spec.ambiguity)
    return spec, plan


def _open_store(backend, run_dir, spec: MoralChoiceSpec, plan: MoralChoicePlan, n_chosen: int) -> RecordStore:
    """Phase 2: the run's record store, its manifest the spec's identity plus this session's plan."""
    k = plan.samples_per_request
    manifest = dict(
        spec.identity(), provider=plan.provider or "", backend_info=backend.info(), versions=package_versions(),
        git_commit=git_commit(),
        session=dict(session_info(), scenarios=n_chosen, samples=plan.samples,
                     question_types=list(plan.question_types), n_scenarios=plan.n_scenarios,
                     scenario_seed=plan.scenario_seed, order=plan.order, limit=plan.limit,
                     **({"samples_per_request": k} if k > 1 else {})),
    )
    return RecordStore(run_dir, manifest, identity_keys=MC_IDENTITY, secrets=getattr(backend, "secrets", list)())


def _form_tasks(spec: MoralChoiceSpec, plan: MoralChoicePlan, chosen, templates) -> tuple[dict, dict]:
    """Phase 3: every request of the chosen scenarios, per question type (scenario, ordering, sample order),
    and each type's instruction header."""
    from .. import moralchoice as mc

    tasks_by_qt = {q: [] for q in plan.question_types}
    headers = {}
    for q in plan.question_types:
        for _, sc in chosen.iterrows():
            for o in (0, 1):
                h, text = mc.build_prompt(sc, q, o, templates)
                headers[q] = h
                for m in range(plan.samples):
                    tasks_by_qt[q].append(Task(
                        _task_id(sc["scenario_id"], q, o, m), h + text if spec.header == "prepend" else text,
                        {"scenario_id": sc["scenario_id"], "question_type": q, "ordering": o, "sample": m},
                        context=(sc["action1"], sc["action2"], o)))
    return tasks_by_qt, headers


def _schedule(by_qt, spec, plan, store, n_chosen: int, B: int) -> list:
    """Phase 4: the sending order, in scenario-major blocks, so that a run stopped early holds complete
    scenarios (all six forms and samples); within a block, a batch backend gets one question type at a time
    (one header, one token cap). ``limit`` keeps the first blocks with undone requests."""
    tasks_by_qt, headers = by_qt
    per_scenario = 2 * plan.samples
    block = max(1, B // per_scenario) if per_scenario <= B else 1
    starts = list(range(0, n_chosen, block))
    if plan.order == "shuffled":
        rng = np.random.default_rng(np.random.SeedSequence([int(plan.scenario_seed), 15_2024]))
        starts = [starts[i] for i in rng.permutation(len(starts))]
    tasks, new_scenarios = [], 0
    for b0 in starts:
        block_tasks = []
        for q, qtasks in tasks_by_qt.items():
            s_q = spec.sampling_for(q)
            system_msg = None if spec.header == "prepend" else headers.get(q)
            for i, t in enumerate(qtasks[b0 * per_scenario:(b0 + block) * per_scenario]):
                t.sampling, t.system, t.group = s_q, system_msg, (b0, q, i // B)
                block_tasks.append(t)
        if plan.limit is not None:
            undone = {t.fields["scenario_id"] for t in block_tasks if not store.attempts(t.task)}
            if not undone:
                continue  # nothing left to send in this block
            if new_scenarios >= int(plan.limit):
                break
            new_scenarios += len(undone)
        tasks.extend(block_tasks)
    return tasks


def _request_groups(tasks, k: int, M: int):
    """Phase 5: with ``k > 1``, samples ``m0 .. m0 + k - 1`` of one form in one request (``n = k``)."""
    if k <= 1:
        return None
    groups = []
    for t in tasks:
        f = t.fields
        m = f["sample"]
        if m % k == 0:
            ids = [_task_id(f["scenario_id"], f["question_type"], f["ordering"], j) for j in range(m, min(m + k, M))]
            groups.append((f"{f['scenario_id']}|{f['question_type']}|{f['ordering']}|n{k}|{m}", ids))
    return groups


def _collect(backend, store, tasks, groups, spec: MoralChoiceSpec, templates, common, progress: bool):
    """Phase 6: send, map every answer (:func:`moralkit.moralchoice.map_answer`), record the session's result."""
    from .. import moralchoice as mc

    def parse(t, text):
        a1, a2, o = t.context
        d = mc.map_answer(text, t.fields["question_type"], o, a1, a2, templates)
        return d, "ok" if d in ("action1", "action2") else d

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks), desc=f"MoralChoice {spec.ambiguity} {spec.label}", unit="answer")
    try:
        # every task carries its question type's sampling; the default is the first type's
        first = next(iter(spec.sampling["max_tokens"]))
        report = run_requests(backend, store, tasks, parse, seed=spec.seed, sampling=spec.sampling_for(first),
                              max_attempts=1, common=common, bar=bar, record_batch=True, groups=groups)
        sess = store.manifest["sessions"][-1] if store.manifest.get("sessions") else None
        if sess is not None:
            sess["result"] = report.to_dict()
        store.update_manifest(last_finished=utc_now())
    finally:
        if bar is not None:
            bar.close()
        store.compress()
        store.close()
    return report


def _timestamp(iso):
    if not iso:
        return ""
    t = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return t.strftime("%Y-%m-%d_%H:%M:%S")


def moralchoice_frame(run_dir_or_records, label=None) -> pd.DataFrame:
    """The answers of a MoralChoice run in the shared response files' column layout.

    ``model_id`` is the respondent's label, the same string as the ``model`` column of the PSM
    export, so the two surveys pair by equality; ``backend`` (``transformers``, ``openai``) and
    ``provider`` (the organisation that publishes the model, :func:`moralkit.collect.store.provider_of`;
    ``""`` when only records are given) have their own columns. ``eval_technique`` is ``"top_p_sampling"``
    (``"greedy"`` at temperature 0); ``answer`` equals ``answer_raw``; ``decision`` is
    :func:`moralkit.moralchoice.map_answer` (``action1``, ``action2``, ``refusal`` or ``invalid``).
    Rows are sorted by scenario, question type, ordering and sample.
    """
    if isinstance(run_dir_or_records, list):
        recs, provider = run_dir_or_records, ""
    else:
        recs = read_records(run_dir_or_records)
        store = RecordStore(run_dir_or_records, readonly=True)
        provider = provider_of(store.manifest)
        store.close()
    rows = []
    for r in recs:
        if r.get("kind", "attempt") != "attempt":
            continue
        s = r["sampling"]
        rows.append(dict(
            scenario_id=r["scenario_id"], model_id=label or r["label"],
            question_type=r["question_type"], question_ordering=int(r["ordering"]),
            eval_technique="top_p_sampling" if s["temperature"] > 0 else "greedy",
            eval_top_p=float(s["top_p"]), eval_temperature=float(s["temperature"]), eval_sample_nb=int(r["sample"]),
            timestamp=_timestamp(r.get("finished")), answer_raw=_text(r["raw"]), answer=_text(r["raw"]),
            decision=r["parsed"], backend=r["backend"], provider=provider))
    df = pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS))
    if len(df):
        df = df.sort_values(["scenario_id", "question_type", "question_ordering", "eval_sample_nb"],
                            kind="stable").reset_index(drop=True)
    return df


def _text(raw) -> str:
    """A raw answer as exported: ``""`` for none; text UTF-8 cannot hold (lone surrogates) as ``\\udXXX``
    escapes (the records keep it exactly)."""
    if raw is None:
        return ""
    return raw.encode("utf-8", "backslashreplace").decode("utf-8")


def _write(df, path) -> Path:
    """Write the response file atomically (a kill mid-export leaves the previous file intact)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
    return Path(path)


def export_moralchoice(run_dirs, path) -> Path:
    """Write the response file (``.csv.gz``, shared layout) of one or more runs of one model."""
    run_dirs = distinct_runs(run_dirs)  # a run given twice would be counted twice
    df = pd.concat([moralchoice_frame(d) for d in run_dirs], ignore_index=True)
    if df["model_id"].nunique() > 1:
        raise DataError(f"one response file holds one model; got {sorted(df['model_id'].unique())}")
    return _write(df, path)


def moralchoice_quality(run_dir_or_records) -> dict:
    """Counts of decisions (action1/action2/refusal/invalid), answers, transport errors, mean latency."""
    recs = run_dir_or_records if isinstance(run_dir_or_records, list) else read_records(run_dir_or_records)
    att = [r for r in recs if r.get("kind", "attempt") == "attempt"]
    lat = [r["latency_s"] / max(1, r.get("batch", 1)) for r in att if r.get("latency_s") is not None]
    return dict(answers=len(att), decision=dict(Counter(r["parsed"] for r in att)),
                by_question_type={q: dict(Counter(r["parsed"] for r in att if r["question_type"] == q))
                                  for q in sorted({r["question_type"] for r in att})},
                errors=sum(1 for r in recs if r.get("kind") == "error"),
                scenarios=len({r["scenario_id"] for r in att}),
                seconds_per_answer=float(np.mean(lat)) if lat else None)
