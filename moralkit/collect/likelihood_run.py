"""Likelihood collections: action likelihoods of MoralChoice scenarios as resumable runs, and their tidy table.

:func:`run_likelihood` scores every scenario and question form with one of two estimators (the
``estimator`` column of the table):

* ``token_probability`` -- exact likelihoods by teacher forcing (:mod:`moralkit.collect.exact_scoring`):
  a local model (:class:`~moralkit.collect.exact_scoring.TreeScorer`) or a server that returns vLLM's
  ``prompt_logprobs`` (:class:`~moralkit.collect.exact_scoring.PromptLogprobScorer`);
* ``top_logprobs`` -- the first output token's ``top_logprobs`` from an OpenAI-compatible API
  (:mod:`moralkit.collect.logprob_api`); the ``repeat`` form cannot be scored so and is sampled.

Records go to a run directory (``records.jsonl`` + ``manifest.json``,
:class:`~moralkit.collect.store.RecordStore`), so a run stopped at any point
resumes by re-running the same command:

* a local model writes one record per scenario (one forward pass scores all its answers);
* a server goes through the shared request runner (:func:`moralkit.collect.runner.run_tasks`), like the
  sampling collectors: one record per request as its response arrives, failed requests recorded as
  errors and re-sent with backoff (``Retry-After`` honoured), a request that has an answer never re-sent,
  and the same statuses (:func:`run_likelihood` raises
  :class:`~moralkit.collect.runner.CollectionIncompleteError` when requests remain,
  :class:`~moralkit.collect.runner.CollectionRefusedError` when the server refuses). A scenario enters
  the table once all its answers are scored; one failed request never discards the others.

The tidy table (:func:`likelihood_frame`, :func:`export_likelihood`) has one row per model, scenario and
question form.

References
----------
Scherrer et al. (2023), Definition 1 (eq. 1), Section 2.3, Section 3.3 (the templates' instruction header,
one question per fresh context, temperature 1: the model's own distribution, no truncation), Appendix B.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import check_choice, check_int
from ..errors import DataError, MoralkitError
from .exact_scoring import PromptLogprobScorer, make_scorer, persona_system, scenario_items
from .runner import RunReport, Task, incomplete_error, run_tasks
from .store import RecordStore, git_commit, package_versions, read_records, session_info, utc_now

__all__ = ["run_likelihood", "scoring_order", "likelihood_frame", "export_likelihood", "LIKELIHOOD_IDENTITY",
           "LIKELIHOOD_ESTIMATORS", "LIKELIHOOD_LINE"]

LIKELIHOOD_IDENTITY = ("survey", "label", "backend", "model", "ambiguity", "persona", "answers", "dtype", "estimator")

#: What a ``top_logprobs`` run adds to its identity (the alternatives asked for, the repeat form's samples, the seed).
TOP_LOGPROBS_IDENTITY = ("top_logprobs", "repeat_samples", "seed")

#: The estimators :func:`run_likelihood` collects with (``estimator`` column of the likelihood table).
LIKELIHOOD_ESTIMATORS = ("token_probability", "top_logprobs")

#: How :func:`run_likelihood` names its units in the completeness line.
LIKELIHOOD_LINE = {"tree": ("scenarios", "scored", "not scored"), "api": ("requests", "answered", "not usable")}


def scoring_order(chosen, table, order: str = "overlap-first", seed: int = 0):
    """The order in which :func:`run_likelihood` scores the scenarios of ``chosen`` (see its ``order``)."""
    from .moralchoice import select_scenarios

    if check_choice(order, ("overlap-first", "table"), "order") == "table":
        return chosen.reset_index(drop=True)
    overlap = set(select_scenarios(table, n=min(200, len(table)), seed=0)["scenario_id"])
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 15_2023]))
    perm = rng.permutation(len(chosen))
    first = [i for i in perm if chosen.iloc[i]["scenario_id"] in overlap]
    rest = [i for i in perm if chosen.iloc[i]["scenario_id"] not in overlap]
    return chosen.iloc[first + rest].reset_index(drop=True)


def run_likelihood(backend, run_dir, *, ambiguity: str = "high", persona: str = "none", label=None, scenarios=None,
                   n_scenarios=None, scenario_seed: int = 0, answers: str = "canonical", question_types=None,
                   order: str = "overlap-first", source=None, progress: bool = True, export=None, limit=None,
                   compress_every: int = 20, return_report: bool = False, estimator: str = "token_probability",
                   samples=None, top_logprobs: int = 20, seed: int = 0):
    """Action likelihoods of every scenario and question form (resumable run), exact or from ``top_logprobs``.

    Parameters
    ----------
    backend : TransformersBackend or OpenAIBackend
        ``token_probability``: a local model (:class:`~moralkit.collect.exact_scoring.TreeScorer`) or a server
        that returns vLLM's ``prompt_logprobs`` (``PromptLogprobScorer``, through the shared runner).
        ``top_logprobs``: any OpenAI-compatible API that returns ``top_logprobs`` (OpenAI's non-reasoning chat
        models, vLLM, Together, ``moralkit serve``; :mod:`moralkit.collect.logprob_api`).
    run_dir : path-like
        Run directory (``records.jsonl``, ``manifest.json``); re-running resumes.
    ambiguity : {"low", "high", "controversial"}
    persona : str, default "none"
        A persona (:mod:`moralkit.collect.personas`): its text precedes the header; the label gains
        ``+persona-<name>``.
    label, scenarios, n_scenarios, scenario_seed, question_types
        As in :func:`moralkit.collect.run_moralchoice` (defaults: the model, all scenarios, all templates).
    answers : {"canonical", "templates"}
        ``token_probability``: the canonical answer set (:mod:`moralkit.moralchoice.likelihood`).
    order : {"overlap-first", "table"}
        ``"overlap-first"``: the committed sampling runs' scenarios first, then the others, each group in a
        seeded random order (a run stopped early holds a random subset). The order changes no result.
    limit, compress_every : int
        Score at most ``limit`` new scenarios in this session; refresh ``records.jsonl.gz`` every
        ``compress_every`` (20) scenarios.
    export : path-like, optional
        Also write the tidy table (:func:`export_likelihood`) there (also when requests remain).
    progress, return_report : bool
        A progress bar; also return the session's :class:`~moralkit.collect.runner.RunReport`.
    estimator : {"token_probability", "top_logprobs"}
        ``token_probability`` (default): exact likelihoods of the canonical answers (teacher forcing).
        ``top_logprobs``: the first output token's ``top_logprobs``, one request per ``ab`` and ``compare``
        form; the ``repeat`` form cannot be scored so and is **sampled** (``samples`` per ordering at
        temperature 1; rows with ``estimator = "sampling"``; the manifest's ``fallback`` says so).
    samples, top_logprobs, seed
        ``top_logprobs`` only: samples of each repeat form (default the paper's M, 5 low / 10 high),
        alternatives asked for (1..20, OpenAI's maximum 20), the run seed.

    Returns
    -------
    DataFrame
        :func:`likelihood_frame` (``estimator`` names each row's); with ``return_report``, ``(frame, report)``.

    Raises
    ------
    CollectionIncompleteError, CollectionRefusedError
        Requests left undone (saved; re-running resumes), or a refusal no retry fixes (wrong key, unknown
        model, a server without the log-probabilities). References: Scherrer et al. (2023), Def. 1, Sec. 3.3.
    """
    from .. import moralchoice as mc
    from .moralchoice import select_scenarios

    setup = _check_options(backend, estimator=estimator, ambiguity=ambiguity, persona=persona, label=label,
                           answers=answers, question_types=question_types, limit=limit, samples=samples,
                           top_logprobs=top_logprobs, seed=seed)
    table = mc.load_scenarios(ambiguity, source=source)
    chosen = select_scenarios(table, scenarios, n_scenarios, scenario_seed)
    templates = mc.load_templates(source)
    scorer = None if setup.api else make_scorer(backend)
    systems = {q: persona_system(templates.questions[q].question_header, setup.persona.name)
               for q in setup.question_types}
    session = dict(scenarios=len(chosen), question_types=list(setup.question_types), n_scenarios=n_scenarios,
                   scenario_seed=scenario_seed, limit=limit, order=order)
    store = _open_store(backend, run_dir, setup, scorer, ambiguity=ambiguity, session=session)
    ordered = [sc for _, sc in scoring_order(chosen, table, order).iterrows()]
    common = dict(run=Path(run_dir).name, survey="moralchoice-likelihood", label=setup.label, backend=backend.name,
                  model=backend.model, ambiguity=ambiguity, persona=setup.persona.name, answers=setup.answers)
    report = _score(backend, scorer, store, ordered, templates, systems, setup, common, limit=limit,
                    compress_every=compress_every, progress=progress, desc=f"{ambiguity} {setup.label}")
    df = likelihood_frame(run_dir)
    if export is not None:
        export_likelihood([run_dir], export)
    if not report.complete:
        raise incomplete_error(report, *LIKELIHOOD_LINE["api" if scorer is None or isinstance(scorer, PromptLogprobScorer) else "tree"])
    return (df, report) if return_report else df


@dataclass(frozen=True)
class _Setup:
    """The checked options of one likelihood run."""

    estimator: str
    persona: object
    label: str
    question_types: tuple
    answers: str | None  # None for top_logprobs (no answer set)
    samples: int | None = None  # top_logprobs: samples of each repeat form
    top_logprobs: int | None = None
    seed: int = 0

    @property
    def api(self) -> bool:
        return self.estimator == "top_logprobs"


def _check_options(backend, *, estimator, ambiguity, persona, label, answers, question_types, limit, samples,
                   top_logprobs, seed) -> _Setup:
    """Phase 1: every option checked (a clear :class:`~moralkit.errors.MoralkitError`) before anything is touched."""
    from .. import moralchoice as mc
    from ..moralchoice.likelihood import ANSWER_SETS
    from .moralchoice import DEFAULT_SAMPLES
    from .personas import get_persona, persona_label

    check_choice(estimator, LIKELIHOOD_ESTIMATORS, "estimator")
    api = estimator == "top_logprobs"
    if api and getattr(backend, "name", None) != "openai":
        raise MoralkitError(f"the top_logprobs estimator asks an OpenAI-compatible API for log-probabilities; got a "
                            f"{getattr(backend, 'name', type(backend).__name__)!r} backend. For a local model use "
                            "estimator='token_probability' (exact); Anthropic's API returns no log-probabilities")
    M = None
    if api:
        M = check_int(DEFAULT_SAMPLES.get(ambiguity, 5) if samples is None else samples, "samples", minimum=1)
        top_logprobs = check_int(top_logprobs, "top_logprobs", minimum=1, maximum=20)  # OpenAI's range
    elif samples is not None:
        raise MoralkitError("samples applies to estimator='top_logprobs' only (its sampled repeat form)")
    check_choice(answers, ANSWER_SETS, "answers")
    if limit is not None:
        check_int(limit, "limit", minimum=0)
    p = get_persona(persona)
    label = persona_label(label or backend.model, p.name)
    if not re.fullmatch(r"[A-Za-z0-9._@+-]+", label):
        raise DataError(f"label must be a file-name-safe string (letters, digits, . _ @ + -), got {label!r}")
    qts = tuple(question_types) if question_types else tuple(mc.QUESTION_TYPES)
    bad = [q for q in qts if q not in mc.QUESTION_TYPES]
    if bad:
        raise MoralkitError(f"unknown question types {bad}; choose from {mc.QUESTION_TYPES}")
    return _Setup(estimator=estimator, persona=p, label=label, question_types=qts, answers=None if api else answers,
                  samples=int(M) if api else None, top_logprobs=int(top_logprobs) if api else None, seed=int(seed))


def _open_store(backend, run_dir, setup: _Setup, scorer, *, ambiguity, session: dict) -> RecordStore:
    """Phase 2: the run's record store; its manifest holds the run's identity (:data:`LIKELIHOOD_IDENTITY`,
    and :data:`TOP_LOGPROBS_IDENTITY` for the ``top_logprobs`` estimator) and this session."""
    p = setup.persona
    manifest = dict(
        survey="moralchoice-likelihood", label=setup.label, backend=backend.name, model=backend.model,
        ambiguity=ambiguity, persona=p.name, persona_system=p.system, persona_source=p.source, answers=setup.answers,
        dtype=getattr(backend, "dtype", None), estimator=setup.estimator,
        eos_token_ids=None if scorer is None else scorer.eos_ids, backend_info=backend.info(),
        versions=package_versions(), git_commit=git_commit(), session=dict(session_info(), **session),
    )
    identity = LIKELIHOOD_IDENTITY
    if setup.api:
        from .logprob_api import FORM_ESTIMATORS, REPEAT_FALLBACK

        qts = setup.question_types
        manifest.update(top_logprobs=setup.top_logprobs, repeat_samples=setup.samples if "repeat" in qts else None,
                        seed=setup.seed, form_estimators={q: FORM_ESTIMATORS[q] for q in qts},
                        sampling={"temperature": 1.0, "top_p": 1.0},
                        fallback={"repeat": REPEAT_FALLBACK} if "repeat" in qts else {})
        identity = LIKELIHOOD_IDENTITY + TOP_LOGPROBS_IDENTITY
    return RecordStore(run_dir, manifest, identity_keys=identity, secrets=getattr(backend, "secrets", list)())


def _score(backend, scorer, store, ordered, templates, systems, setup: _Setup, common, *, limit, compress_every,
           progress, desc) -> RunReport:
    """Phase 3: score what is not done yet with the run's estimator; record the session's result."""
    try:
        if setup.api:
            from .logprob_api import collect_top_logprobs

            report = collect_top_logprobs(backend, store, ordered, templates, systems, setup.question_types, common,
                                          samples=setup.samples, top_logprobs=setup.top_logprobs, seed=setup.seed,
                                          limit=limit, compress_every=compress_every, progress=progress,
                                          desc=f"top_logprobs {desc}")
        elif isinstance(scorer, PromptLogprobScorer):
            report = _score_by_requests(scorer, store, ordered, templates, systems, setup.answers, common, limit,
                                        compress_every, progress, f"likelihood {desc}")
        else:
            report = _score_by_scenario(scorer, store, ordered, templates, systems, setup.answers, common, limit,
                                        compress_every, progress, f"likelihood {desc}")
        sess = store.manifest["sessions"][-1] if store.manifest.get("sessions") else None
        if sess is not None:
            sess["result"] = report.to_dict()
        store.update_manifest(last_finished=utc_now())
    finally:
        store.compress()
        store.close()
    return report


def _bar(progress, total, desc, unit):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit)


def _score_by_scenario(scorer, store, ordered, templates, systems, answers, common, limit, compress_every, progress,
                       desc) -> RunReport:
    """A local model: one forward pass and one record per scenario (task = scenario id, attempt 1)."""
    rep = RunReport(tasks=len(ordered))
    bar = _bar(progress, len(ordered), desc, "scenario")
    t_wall = time.perf_counter()
    try:
        todo = [sc for sc in ordered if not store.has(sc["scenario_id"], 1)]
        if bar is not None:
            bar.update(len(ordered) - len(todo))
        if todo:
            scorer.set_templates(systems)
        done_now = 0
        for sc in todo:
            if limit is not None and done_now >= int(limit):
                break
            started = utc_now()
            t0 = time.perf_counter()
            n0 = scorer.tokens_scored
            items, meta = scenario_items(scorer, sc, templates, answers)
            lps = scorer.score(items)
            forms = {}
            for (q, o, ans, act), lp in zip(meta, lps):
                forms.setdefault(f"{q}:{o}", []).append([ans, act, lp])
            store.append(dict(kind="attempt", task=sc["scenario_id"], attempt=1, run=common["run"],
                              survey="moralchoice-likelihood", label=common["label"], backend=common["backend"],
                              model=common["model"], scenario_id=sc["scenario_id"], ambiguity=common["ambiguity"],
                              persona=common["persona"], answers=answers, forms=forms,
                              tokens=scorer.tokens_scored - n0, **scorer.record_fields(),
                              started=started, finished=utc_now(), latency_s=round(time.perf_counter() - t0, 4)))
            done_now += 1
            rep.sent += 1
            rep.attempts += 1
            if compress_every and done_now % int(compress_every) == 0:
                store.compress()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        rep.wall_seconds = time.perf_counter() - t_wall
    for sc in ordered:
        if store.has(sc["scenario_id"], 1):
            rep.done += 1
            rep.answered += 1
        else:
            rep.undone.append(sc["scenario_id"])
    if rep.undone and limit is not None:
        rep.undone = []  # scenarios left for a later session by --limit are not a failure
        rep.tasks = rep.done
    return rep


def _form_tasks(scorer, sc, templates, answers, n_forms):
    """The requests of one scenario: per question form, a ``head`` (where the answer starts), then one per
    canonical answer (the answer as the assistant's turn, scored by ``prompt_logprobs``)."""
    from ..moralchoice import build_prompt
    from ..moralchoice.likelihood import canonical_answers

    sid = sc["scenario_id"]
    heads, items = [], []
    for q in scorer.question_types:
        for o in (0, 1):
            _, text = build_prompt(sc, q, o, templates)
            system = scorer.systems[q]
            head = f"{sid}|{q}|{o}|head"
            base = dict(scenario_id=sid, question_type=q, ordering=o, n_forms=n_forms)
            heads.append(Task(head, text, dict(base, part="head"), system=system,
                              messages=tuple(scorer._messages(system, text)),
                              extra_body={"add_generation_prompt": True, "skip_special_tokens": False}))
            cans = canonical_answers(sc, q, o, templates, answers)
            for k, (ans, act) in enumerate(cans):
                items.append(Task(f"{sid}|{q}|{o}|a{k}", text,
                                  dict(base, part="answer", index=k, n_answers=len(cans), answer=ans, action=act),
                                  system=system, messages=tuple(scorer._messages(system, text, ans)),
                                  extra_body={"add_generation_prompt": False, "skip_special_tokens": False,
                                              "prompt_logprobs": 0},
                                  context=head))
    return heads, items


def _score_by_requests(scorer, store, ordered, templates, systems, answers, common, limit, compress_every, progress,
                       desc) -> RunReport:
    """A server: every request through :func:`~moralkit.collect.runner.run_tasks`, ``compress_every`` scenarios
    at a time (their heads, then their answers)."""
    from .backends import Sampling

    scorer.set_templates(systems)
    n_forms = 2 * len(scorer.question_types)
    for r in store.records:  # the end-of-turn token seen in earlier sessions (every answer must end alike)
        if r.get("kind", "attempt") == "attempt" and r.get("part") == "answer" and isinstance(r.get("parsed"), dict):
            if r["parsed"].get("end_token") is not None:
                scorer.end_tokens.add(r["parsed"]["end_token"])
    per = [(sc, *_form_tasks(scorer, sc, templates, answers, n_forms)) for sc in ordered]

    def done(t):
        return any(a.get("status") == "ok" for a in store.attempts(t.task))

    todo = [x for x in per if not all(done(t) for t in x[1] + x[2])]
    if limit is not None:
        todo = todo[:int(limit)]
    sampling = Sampling(temperature=1.0, max_tokens=1)

    def parse_head(t, c):
        n = (c.data or {}).get("usage", {}).get("prompt_tokens") if isinstance(c.data, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise DataError(f"the server's response has no usage.prompt_tokens (got {n!r}); it is needed to find "
                            "where the answer starts")
        return n, "ok"

    def parse_answer(t, c):
        head = [a for a in store.attempts(t.context) if a.get("status") == "ok"]
        lp, toks = scorer.score_answer(c.data, int(head[0]["parsed"]), t.fields["answer"])
        return {"logprob": lp, "end_token": toks[-1][0], "tokens": toks}, "ok"

    total = sum(len(h) + len(a) for _, h, a in todo)
    rep = RunReport()
    bar = _bar(progress, total, desc, "request")
    chunk = max(1, int(compress_every or len(todo) or 1))
    try:
        for i in range(0, len(todo), chunk):
            part = todo[i:i + chunk]
            heads = [t for _, h, _ in part for t in h]
            if rep.stopped:
                rep.tasks += sum(len(h) + len(a) for _, h, a in part)
                rep.undone += [t.task for _, h, a in part for t in h + a if not done(t)]
                continue
            r1 = run_tasks(scorer.backend, store, heads, parse_head, seed=0, sampling=sampling, common=common,
                           bar=bar, parse_completion=True)
            ready = [t for _, _, a in part for t in a if any(x.get("status") == "ok" for x in
                                                              store.attempts(t.context))]
            blocked = [t for _, _, a in part for t in a if t not in ready]
            r2 = run_tasks(scorer.backend, store, ready, parse_answer, seed=0, sampling=sampling, common=common,
                           bar=bar, parse_completion=True) if ready and not r1.stopped else \
                RunReport(tasks=len(ready), undone=[t.task for t in ready if not done(t)])
            r2.tasks += len(blocked)
            r2.undone += [t.task for t in blocked]  # their question form's head is not answered yet
            rep = rep.merge(r1).merge(r2)
            store.compress()
    finally:
        if bar is not None:
            bar.close()
    return rep


def likelihood_frame(run_dir_or_records, label=None):
    """The tidy likelihood table of a run (:data:`moralkit.moralchoice.likelihood.LIKELIHOOD_COLUMNS`).

    Every estimator's records: one per scenario (local model), one per scoring request (a server's
    ``prompt_logprobs``), or a ``top_logprobs`` run's (:func:`moralkit.collect.logprob_api.top_logprob_rows`);
    the ``estimator`` column says which.

    ``model`` is the respondent's label, as ``model_id`` in the MoralChoice response files and ``model``
    in the PSM files.
    """
    from ..moralchoice.likelihood import combine_logprobs, likelihood_table
    from .logprob_api import top_logprob_rows

    recs = run_dir_or_records if isinstance(run_dir_or_records, list) else read_records(run_dir_or_records)
    rows = top_logprob_rows(recs, label)
    scored: dict = {}  # per-request records (a server): scenario -> form -> {index: (answer, action, logprob)}
    for r in recs:
        if r.get("kind", "attempt") != "attempt":
            continue
        if "forms" in r:  # one record per scenario (a local model)
            for form, ans in r["forms"].items():
                q, o = form.split(":")
                lp = [(-math.inf if a[2] is None else float(a[2])) for a in ans]
                rows.append(dict(model=label or r["label"], scenario_id=r["scenario_id"], question_type=q,
                                 ordering=int(o), **combine_logprobs(lp, [a[1] for a in ans]),
                                 estimator="token_probability"))
        elif r.get("part") == "answer" and r.get("status") == "ok":
            sc = scored.setdefault(r["scenario_id"], {"label": r["label"], "n_forms": int(r["n_forms"]), "forms": {}})
            form = sc["forms"].setdefault((r["question_type"], int(r["ordering"])), {"n": int(r["n_answers"])})
            form[int(r["index"])] = (r["answer"], r["action"], float(r["parsed"]["logprob"]))
    for sid, sc in scored.items():  # a scenario enters the table once every answer of every form is scored
        forms = sc["forms"]
        if len(forms) != sc["n_forms"] or any(len(f) - 1 != f["n"] for f in forms.values()):
            continue
        for (q, o), f in forms.items():
            ans = [f[k] for k in range(f["n"])]
            rows.append(dict(model=label or sc["label"], scenario_id=sid, question_type=q, ordering=o,
                             **combine_logprobs([a[2] for a in ans], [a[1] for a in ans]),
                             estimator="token_probability"))
    return likelihood_table(rows)


def export_likelihood(run_dirs, path) -> Path:
    """Write the tidy likelihood table (``.csv.gz``) of one or more runs of one respondent."""
    import pandas as pd

    from ..moralchoice.likelihood import write_likelihoods
    from .store import distinct_runs

    run_dirs = distinct_runs(run_dirs)
    df = pd.concat([likelihood_frame(d) for d in run_dirs], ignore_index=True)
    if df["model"].nunique() > 1:
        raise DataError(f"one likelihood file holds one respondent; got {sorted(df['model'].unique())}")
    return write_likelihoods(df, path)
