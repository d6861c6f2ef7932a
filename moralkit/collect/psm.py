"""Administer the Priced Survey Methodology (PSM) to an LLM and export the answers.

Protocol (Seror 2025, Section 2.1-2.2), as implemented by :func:`run_psm`:

1. Round 0: :func:`moralkit.psm.design.unconstrained_prompt`, parsed with
   :func:`moralkit.psm.design.parse_unconstrained`. Its answer ``q0`` fixes the
   corner flips of the constrained rounds (:meth:`moralkit.psm.design.Round.options`);
   no valid answer leaves the nominal corners.
2. The 160 constrained rounds of :func:`moralkit.psm.design.make_design`, prompt
   :func:`moralkit.psm.design.constrained_prompt` verbatim, parsed with
   :func:`moralkit.psm.design.parse_option`; in the paper's order or shuffled (seeded).
3. Every prompt is a fresh single-turn chat (conversation state reset per round);
   the prompt is the user message, with no system prompt unless one is given.
4. A round without a valid answer is sent again, up to 3 attempts; a round with
   no valid answer after 3 attempts is missing (``chosen = 0``). Every raw
   attempt is kept in the run's records.

The run's identity (what its manifest records and a resume must match) is a :class:`PSMSpec`;
:func:`run_psm` builds it from its keywords or takes it as ``spec=``.

Each attempt's sampling seed is derived from ``(seed, round, attempt)``
(:func:`moralkit.collect.store.derive_seed`), so with ``batch_size=1`` a run
gives the same answers whether or not it was interrupted and resumed.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.1
(prompt, three attempts, rounds marked empty) and Section 2.2 (design, corner flip).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..checks import check_choice, check_int
from ..errors import DataError, MoralkitError
from ..psm.dataset import PSMDataset, write_psm
from ..psm.design import (
    N_OPTIONS,
    constrained_prompt,
    make_design,
    parse_option,
    parse_unconstrained,
    unconstrained_prompt,
)
from .backends import Backend, Sampling, check_sampling, survey_max_tokens
from .batch import run_requests
from .runner import Task, check_label, incomplete_error
from .store import (
    RecordStore,
    distinct_runs,
    git_commit,
    package_versions,
    prompt_sha256,
    provider_of,
    read_records,
    session_info,
    utc_now,
)

__all__ = ["run_psm", "PSMSpec", "psm_dataset", "export_psm", "psm_quality", "round_order", "PSM_IDENTITY",
           "MAX_ATTEMPTS"]

#: Attempts per round before it is marked missing (Section 2.1).
MAX_ATTEMPTS = 3


def round_order(order: str = "paper", seed: int = 0, n: int = 160) -> list[int]:
    """Round numbers (1..n) in presentation order: ``"paper"`` (1..n) or ``"shuffled"`` (seeded)."""
    if check_choice(order, ("paper", "shuffled"), "order") == "paper":
        return list(range(1, n + 1))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 160_2025]))
    return [int(i) + 1 for i in rng.permutation(n)]


@dataclass(frozen=True, kw_only=True)
class PSMSpec:
    """What a PSM run asks of its respondent: the run's identity, exactly as its manifest records it.

    A run directory holds one spec; resuming it with another is refused (the record store compares
    :data:`PSM_IDENTITY`, the names of these fields, with the stored manifest). Build one for a backend
    with :meth:`for_backend`, which checks every value. ``order`` and ``limit`` are not part of it: every
    round is a fresh chat whose seeds depend on ``(seed, round, attempt)`` only.

    Attributes
    ----------
    label, backend, model : str
        The respondent's label and the backend's name and model.
    design_seed : int
        Seed of :func:`moralkit.psm.design.make_design`.
    seed : int
        Run seed (each attempt's seed is derived from it).
    sampling : dict
        :meth:`Sampling.to_dict <moralkit.collect.backends.Sampling.to_dict>`.
    system : str or None
        System message (none in the paper).
    max_attempts : int
        Attempts per round (Seror 2025, Section 2.1: 3).
    n_options : int
        Options per constrained round.
    survey : str
        ``"psm"``.
    """

    survey: str = "psm"
    label: str
    backend: str
    model: str
    design_seed: int = 0
    seed: int = 0
    sampling: dict = field(default_factory=dict)
    system: str | None = None
    max_attempts: int = MAX_ATTEMPTS
    n_options: int = N_OPTIONS

    @classmethod
    def for_backend(cls, backend: Backend, *, label=None, design_seed: int = 0, seed: int = 0,
                    sampling: Sampling | None = None, system: str | None = None, max_attempts: int = MAX_ATTEMPTS,
                    n_options: int = N_OPTIONS) -> "PSMSpec":
        """The spec of a run of ``backend`` (defaults as :func:`run_psm`), checked; refused sampling raises
        before any run directory is touched."""
        sampling = sampling or Sampling(temperature=1.0, top_p=1.0, max_tokens=survey_max_tokens(backend, 16))
        check_sampling(backend, sampling)
        label = check_label(label or backend.model)
        return cls(label=label, backend=backend.name, model=backend.model,
                   design_seed=check_int(design_seed, "design_seed", minimum=0),
                   seed=check_int(seed, "seed"), sampling=sampling.to_dict(), system=system,
                   max_attempts=check_int(max_attempts, "max_attempts", minimum=1),
                   n_options=check_int(n_options, "n_options", minimum=1))

    def identity(self) -> dict:
        """The manifest's identity fields (:data:`PSM_IDENTITY`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def sampling_of(self, backend: Backend) -> Sampling:
        """The spec's sampling as a :class:`~moralkit.collect.backends.Sampling` (checked for ``backend``)."""
        sampling = Sampling(**self.sampling)
        check_sampling(backend, sampling)
        return sampling


#: Manifest keys that must match to resume a PSM run: the fields of :class:`PSMSpec`.
PSM_IDENTITY = tuple(f.name for f in fields(PSMSpec))
# ``order`` is not part of a run's identity: every round is a fresh chat and its seeds depend on
# (seed, round, attempt) only, so the order changes which rounds are done first, not the answers.
# Each session records the order it used.

#: The identity keywords of :func:`run_psm` and their defaults (left so when ``spec`` is given).
_IDENTITY_DEFAULTS = dict(label=None, design_seed=0, seed=0, sampling=None, system=None, max_attempts=MAX_ATTEMPTS,
                          n_options=N_OPTIONS)


def run_psm(backend: Backend, run_dir, *, label=None, design_seed: int = 0, seed: int = 0, order: str = "paper",
            sampling: Sampling | None = None, system: str | None = None, max_attempts: int = MAX_ATTEMPTS,
            limit: int | None = None, n_options: int = N_OPTIONS, progress: bool = True, export=None,
            provider=None, return_report: bool = False, spec: PSMSpec | None = None) -> PSMDataset:
    """Administer the PSM (round 0, then the constrained rounds) and return the dataset so far.

    Parameters
    ----------
    backend : Backend
        From :func:`moralkit.collect.backends.make_backend`.
    run_dir : path-like
        Run directory (records + manifest). Re-running with the same arguments resumes.
    label : str, optional
        Model label in the exported data (default ``backend.model``); one label per respondent.
    design_seed : int, default 0
        Seed of :func:`moralkit.psm.design.make_design` (same options for every model with the same seed).
    seed : int, default 0
        Sampling seed (each attempt's seed is derived from it) and seed of the shuffled order.
    order : {"paper", "shuffled"}
        Presentation order of the constrained rounds. ``"shuffled"`` (seeded by ``seed``) makes a partial run
        (``limit``, or a run stopped early) a random subset of the 160 rounds. It may change between sessions.
    sampling : Sampling, optional
        Default ``Sampling(temperature=1.0, top_p=1.0, max_tokens=16)`` (the APIs' default temperature; the
        paper did not set one); for a reasoning model ``max_tokens`` is
        :data:`~moralkit.collect.backends.REASONING_MAX_TOKENS` (its hidden reasoning counts against it).
    system : str, optional
        System message (none in the paper).
    max_attempts : int, default 3
        Attempts per round (Section 2.1).
    limit : int, optional
        Administer only the first ``limit`` constrained rounds of the order (a smoke run).
    n_options : int, default 100
    progress : bool
        Show a tqdm progress bar.
    export : path-like, optional
        Also write the tidy ``.csv.gz`` (:func:`export_psm`) there at the end.
    provider : str, optional
        The organisation that publishes the model, the ``provider`` column of the tidy file (default: the
        organisation of the backend's upstream hub id, e.g. ``"Qwen"``, else ``""``; see
        :func:`moralkit.collect.store.provider_of`). The backend kind has its own column.
    return_report : bool, default False
        Also return the session's :class:`~moralkit.collect.runner.RunReport`.
    spec : PSMSpec, optional
        The run's identity in one object (:meth:`PSMSpec.for_backend`), in place of ``label``, ``design_seed``,
        ``seed``, ``sampling``, ``system``, ``max_attempts`` and ``n_options`` (then left at their defaults).

    Returns
    -------
    PSMDataset
        Completed rounds only (answered or missing after ``max_attempts``); with ``return_report``, a pair.

    Raises
    ------
    MoralkitError
        An option out of range (before the run directory is touched), or ``spec`` given together with
        identity keywords.
    CollectionIncompleteError, CollectionRefusedError
        Rounds are left undone (requests that kept failing: completed records are saved, the export
        written, re-running resumes), or a response no retry can fix (HTTP 401, 403, 404) stopped the
        session; the message names them and the server's (redacted) last message. Requests go through
        :func:`moralkit.collect.runner.run_tasks`: a malformed or failed response is recorded and re-sent.

    References
    ----------
    Seror (2025), Sections 2.1-2.2.
    """
    identity = dict(label=label, design_seed=design_seed, seed=seed, sampling=sampling, system=system,
                    max_attempts=max_attempts, n_options=n_options)
    spec, sampling = _spec_of(backend, spec, identity)
    limit = _check_session(order, limit)
    design = make_design(spec.design_seed, n_options=spec.n_options)
    store = _open_store(backend, run_dir, spec, design, order=order, limit=limit, provider=provider)
    rounds = round_order(order, spec.seed, len(design))[:limit]
    report = _session(backend, store, spec, sampling, design, rounds, Path(run_dir).name, progress)
    ds = psm_dataset(run_dir)
    if export is not None:
        write_psm([ds], export)
    if not report.complete:
        raise incomplete_error(report, "rounds (incl. round 0)")
    return (ds, report) if return_report else ds


def _spec_of(backend, spec: PSMSpec | None, identity: dict) -> tuple[PSMSpec, Sampling]:
    """Phase 1: the run's spec (given, or built from the identity keywords) and its sampling, checked."""
    if spec is None:
        spec = PSMSpec.for_backend(backend, **identity)
        return spec, identity["sampling"] or Sampling(**spec.sampling)
    given = sorted(k for k, v in identity.items() if v != _IDENTITY_DEFAULTS[k])
    if given:
        raise MoralkitError(f"give the run's identity either as spec= or as keywords, not both ({given})")
    if (spec.backend, spec.model) != (backend.name, backend.model):
        raise MoralkitError(f"the spec is for {spec.backend}/{spec.model}, the backend is {backend.name}/"
                            f"{backend.model}")
    return spec, spec.sampling_of(backend)


def _check_session(order: str, limit):
    """Phase 1 (the session): ``order`` one of ``"paper"``, ``"shuffled"``; ``limit`` None or an integer >= 0."""
    check_choice(order, ("paper", "shuffled"), "order")
    return None if limit is None else check_int(limit, "limit", minimum=0)


def _open_store(backend, run_dir, spec: PSMSpec, design, *, order, limit, provider) -> RecordStore:
    """Phase 2: the run's record store, its manifest the spec's identity plus this session's order and limit;
    a run whose sessions used different orders says so."""
    manifest = dict(
        survey=spec.survey, label=spec.label, backend=spec.backend, model=spec.model, design_seed=spec.design_seed,
        design_fingerprint=design.fingerprint(), seed=spec.seed, order=order, sampling=spec.sampling,
        system=spec.system, max_attempts=spec.max_attempts, n_options=spec.n_options, provider=provider or "",
        backend_info=backend.info(), versions=package_versions(), git_commit=git_commit(),
        unconstrained_prompt_sha256=prompt_sha256([{"role": "user", "content": unconstrained_prompt()}]),
        session=dict(session_info(), order=order, limit=limit),
    )
    store = RecordStore(run_dir, manifest, identity_keys=PSM_IDENTITY, secrets=getattr(backend, "secrets", list)())
    orders = {s.get("order", store.manifest.get("order")) for s in store.manifest.get("sessions", [])}
    if len(orders) > 1:
        store.update_manifest(order="mixed: " + ", ".join(
            f"{s.get('started')} {s.get('order')}" for s in store.manifest["sessions"]))
    return store


def _session(backend, store, spec: PSMSpec, sampling: Sampling, design, rounds, run_name, progress: bool):
    """Phases 3 and 4 with a progress bar: collect, record the result; the store is closed whatever happens."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=1 + len(rounds), desc=f"PSM {spec.label}", unit="round")
    try:
        report = _collect(backend, store, spec, sampling, design, rounds, run_name, bar)
        _record_result(store, report, finished=report.complete and len(rounds) == len(design))
    finally:
        if bar is not None:
            bar.close()
        store.compress()
        store.close()
    return report


def _collect(backend, store, spec: PSMSpec, sampling: Sampling, design, rounds, run_name, bar):
    """Phase 3: round 0, then (its answer fixing the corners) the constrained rounds; the session's report.
    Without a valid round-0 answer the corners are unknown and the rounds are left undone."""
    common = dict(run=run_name, survey="psm", label=spec.label, backend=spec.backend, model=spec.model,
                  sampling=spec.sampling, design_seed=spec.design_seed)
    ask = dict(seed=spec.seed, sampling=sampling, max_attempts=spec.max_attempts, common=common, bar=bar)
    r0 = Task("r000", unconstrained_prompt(), {"round": 0}, system=spec.system,
              sampling=sampling.__class__(**{**sampling.to_dict(), "max_tokens": max(sampling.max_tokens, 32)}))
    report = run_requests(backend, store, [r0], lambda t, text: parse_unconstrained(text), **ask)
    if not report.complete:  # without round 0 the corners are unknown: nothing else can be asked
        report.tasks += len(rounds)
        report.undone += [f"r{r:03d}" for r in rounds]
        return report
    q0 = _q0(store)
    tasks = []
    for r in rounds:
        rd = design[r - 1]
        tasks.append(Task(f"r{r:03d}", constrained_prompt(rd.options(q0)),
                          {"round": r, "corner": "".join(str(int(v)) for v in rd.corner(q0))}, system=spec.system))
    return report.merge(run_requests(backend, store, tasks, lambda t, text: parse_option(text, spec.n_options),
                                     **ask))


def _record_result(store, report, *, finished: bool) -> None:
    """Phase 4: the session's result in the manifest, and the run's ``finished`` time once every round is done."""
    sess = store.manifest["sessions"][-1] if store.manifest.get("sessions") else None
    if sess is not None:
        sess["result"] = report.to_dict()
    store.update_manifest(finished=utc_now() if finished else store.manifest.get("finished"))


def _q0(store):
    ok = [a for a in store.attempts("r000") if a["status"] == "ok"]
    return None if not ok else np.asarray(ok[0]["parsed"], dtype=np.int64)


def psm_dataset(run_dir, label=None) -> PSMDataset:
    """Build the :class:`~moralkit.psm.dataset.PSMDataset` of a run from its raw records.

    Only completed rounds are included (a valid answer, or ``max_attempts``
    attempts without one: ``chosen = 0``), in round order. The options are
    regenerated from the manifest's design seed and checked against its
    fingerprint; the corner recorded with each attempt is checked too.
    """
    run_dir = Path(run_dir)
    store = RecordStore(run_dir, readonly=True)
    try:
        m = store.manifest
        if m.get("survey") != "psm":
            raise DataError(f"{run_dir} is not a PSM run (survey={m.get('survey')!r})")
        design = make_design(m["design_seed"], n_options=m.get("n_options", N_OPTIONS))
        if design.fingerprint() != m["design_fingerprint"]:
            raise DataError(f"{run_dir}: design fingerprint mismatch; the design code changed since collection")
        max_attempts = int(m["max_attempts"])
        q0 = _q0(store)
        rows = []
        for rd in design:
            att = store.attempts(f"r{rd.index:03d}")
            ok = [a for a in att if a["status"] == "ok"]
            if not ok and len(att) < max_attempts:
                continue
            corner = rd.corner(q0)
            for a in att:
                if a.get("corner") and a["corner"] != "".join(str(int(v)) for v in corner):
                    raise DataError(f"{run_dir}: round {rd.index} was shown corner {a['corner']}, expected "
                                     f"{corner}; the records do not match the design")
            rows.append((rd, corner, int(ok[0]["parsed"]) if ok else 0, len(att)))
    finally:
        store.close()
    T = len(rows)
    return PSMDataset(
        model=label or m["label"],
        corners=np.array([r[1] for r in rows], dtype=np.int64).reshape(T, 5),
        prices=np.array([r[0].prices for r in rows], dtype=np.int64).reshape(T, 5),
        options=np.array([r[0].options(q0) for r in rows], dtype=np.int64).reshape(T, design[0].options_y.shape[0], 5),
        chosen=np.array([r[2] for r in rows], dtype=np.int64),
        round_index=np.array([r[0].index for r in rows], dtype=np.int64),
        corner_index=np.array([r[0].corner_index for r in rows], dtype=np.int64),
        price_index=np.array([r[0].price_index for r in rows], dtype=np.int64),
        q0=q0, provider=provider_of(m), backend=m["backend"], run=run_dir.name,
        attempts=np.array([r[3] for r in rows], dtype=np.int64),
    )


def export_psm(run_dirs, path) -> Path:
    """Write the tidy PSM file (:func:`moralkit.psm.dataset.write_psm`) of one or more runs."""
    run_dirs = distinct_runs(run_dirs)  # a run given twice would be counted twice
    return write_psm([psm_dataset(d) for d in run_dirs], path)


def psm_quality(run_dir_or_records) -> dict:
    """Data-quality summary of a PSM run from its raw records.

    Returns a dict with ``rounds`` (completed), ``answered``, ``missing``,
    ``attempts`` (total requests), ``attempts_per_round`` (Counter: attempts → rounds),
    ``status`` (Counter of parse statuses over all attempts, e.g. ``ok``, ``no_option``,
    ``out_of_range``, ``refusal``), ``errors`` (transport errors, not counted as attempts),
    ``q0`` and ``mean_latency_s``, ``prompt_tokens_per_s``.
    """
    recs = run_dir_or_records
    if not isinstance(recs, list):
        recs = read_records(recs)
    att = [r for r in recs if r.get("kind", "attempt") == "attempt"]
    by_task: dict[str, list] = {}
    for r in att:
        by_task.setdefault(r["task"], []).append(r)
    constrained = {t: v for t, v in by_task.items() if t != "r000"}
    answered = sum(any(a["status"] == "ok" for a in v) for v in constrained.values())
    max_att = max([int(a["attempt"]) for a in att] + [MAX_ATTEMPTS])
    completed = sum(any(a["status"] == "ok" for a in v) or len(v) >= max_att for v in constrained.values())
    lat = [r["latency_s"] for r in att if r.get("latency_s") is not None]
    toks = [r["prompt_tokens"] for r in att if r.get("prompt_tokens")]
    r0 = [a for a in by_task.get("r000", []) if a["status"] == "ok"]
    return dict(
        rounds=completed, answered=answered, missing=completed - answered, attempts=len(att),
        attempts_per_round=Counter(len(v) for v in constrained.values()),
        status=Counter(a["status"] for a in att),
        errors=sum(1 for r in recs if r.get("kind") == "error"),
        q0=tuple(r0[0]["parsed"]) if r0 else None,
        mean_latency_s=float(np.mean(lat)) if lat else None,
        prompt_tokens_per_s=float(np.sum(toks) / np.sum(lat)) if lat and toks and len(toks) == len(lat) else None,
    )
