"""The project's own runs: where the committed collections live and which estimator represents a respondent.

Every reader of the project's own data (the notebooks, :mod:`moralkit.studies.findings`,
:mod:`moralkit.studies.crossmethod`, ``run_all.py``'s data check, ``load_responses``) asks this module,
so the folder names below are written in one place.

===========================  =================================  ==============================================
kind (:data:`RUN_DIRS`)      folder under :func:`moralkit.paths.data_dir`  what it holds
===========================  =================================  ==============================================
``"psm"``                    ``psm/``                           PSM answers, one ``<label>.csv.gz`` per run
``"responses"``              ``moralchoice/``                   MoralChoice sampled answers (response layout)
``"likelihoods"``            ``moralchoice_likelihood/``        MoralChoice exact likelihoods (token probs)
``"raw"``                    ``raw/``                           the collector's run folders (manifest, records)
``"derived"``                ``derived/``                       results computed once from the runs by a command
                                                                (:mod:`moralkit.psm.hm_table1`), with input hashes
===========================  =================================  ==============================================

Which estimator represents a respondent of MoralChoice that has both sampled answers and exact
likelihoods (Scherrer et al. 2023, eq. 7 against Definition 1 computed from token probabilities):

* :func:`prefer_exact` — for the agreement correlations (Section 4.3) of the cross-method study, which
  need one scenario set per respondent: the exact likelihoods once they cover every scenario the sampled
  answers cover, the sampled answers while a likelihood run is partial;
* :func:`best_estimate` — for per-scenario displays (notebook 05's "paper beside this run"): the exact
  likelihoods wherever a respondent has them, its sampled answers for the others.

Examples
--------
>>> from moralkit import runs
>>> runs.run_dir("likelihoods", "/data").as_posix()
'/data/moralchoice_likelihood'
"""

from __future__ import annotations

import os
from pathlib import Path

from . import paths
from .checks import check_choice
from .errors import DataError

__all__ = ["RUN_DIRS", "run_dir", "own_runs", "prefer_exact", "best_estimate"]

#: The folder of each kind of committed run, under :func:`moralkit.paths.data_dir`.
RUN_DIRS = {"psm": "psm", "responses": "moralchoice", "likelihoods": "moralchoice_likelihood", "raw": "raw",
            "derived": "derived"}


def run_dir(kind: str, data: str | os.PathLike | None = None) -> Path:
    """The folder of one kind of the project's runs (:data:`RUN_DIRS`).

    Parameters
    ----------
    kind : {"psm", "responses", "likelihoods", "raw", "derived"}
    data : path, optional
        The data folder; default :func:`moralkit.paths.data_dir` (``MORALKIT_DATA_DIR``).
    """
    check_choice(kind, RUN_DIRS, "kind")
    return Path(data if data is not None else paths.data_dir()) / RUN_DIRS[kind]


def own_runs(kind: str, path=None, *, name: str = "path") -> Path | bool:
    """The runs a reader should use: ``path`` when given, else the committed folder when it exists.

    Parameters
    ----------
    kind : {"psm", "responses", "likelihoods", "raw", "derived"}
    path : path, False or None
        ``None``: :func:`run_dir` ``(kind)`` when that folder exists, else ``False``; ``False``: none;
        a path: that file or folder, which must exist.
    name : str
        The caller's parameter name, used in the error message.

    Returns
    -------
    Path or False

    Raises
    ------
    DataError
        A path that was given explicitly does not exist.
    """
    if path is False:
        return False
    if path is None:
        d = run_dir(kind)
        return d if d.is_dir() else False
    p = Path(path)
    if not p.exists():
        raise DataError(f"{name}={str(path)!r} does not exist; pass a folder or file of {kind} runs "
                        f"(see data/{RUN_DIRS[kind]}/), None for the committed runs, or False for none")
    return p


def prefer_exact(sampled, exact):
    """One estimator per respondent: exact likelihoods where they cover what was sampled.

    A respondent with exact likelihoods is represented by them when they cover every scenario its sampled
    answers cover; while they are partial (a likelihood run still in progress) its sampled answers are kept,
    so that its agreement correlations rest on the larger scenario set.

    Parameters
    ----------
    sampled, exact : DataFrame
        :func:`moralkit.moralchoice.scenario_metrics` of sampled answers and of exact likelihoods
        (columns ``model`` and ``scenario_id``, the same respondent labels); either may be empty.

    Returns
    -------
    metrics : DataFrame
        One estimator per respondent (column ``estimator`` says which): the sampled rows, then the exact.
    notes : list of str
        Which respondents use which estimator, and why.
    """
    import pandas as pd

    if not len(sampled):
        return exact, []
    if not len(exact):
        return sampled, []
    s_ids = sampled.groupby("model")["scenario_id"].agg(set)
    e_ids = exact.groupby("model")["scenario_id"].agg(set)
    replaced, kept = [], []
    for m in sorted(set(s_ids.index) & set(e_ids.index)):
        (replaced if s_ids[m] <= e_ids[m] else kept).append(m)
    notes = []
    if replaced:
        notes.append(f"  exact likelihoods used instead of sampled answers for {replaced}")
    for m in kept:
        notes.append(f"  {m}: exact likelihoods cover {len(s_ids[m] & e_ids[m])} of the {len(s_ids[m])} scenarios "
                     "of its sampled answers; the sampled answers are used until they cover all")
    use_exact = exact[~exact["model"].isin(kept)]
    use_sampled = sampled[~sampled["model"].isin(set(use_exact["model"]))]
    return pd.concat([use_sampled, use_exact], ignore_index=True), notes


def best_estimate(sampled_by_set: dict, exact_by_set: dict, *, suffix: str | None = None) -> dict:
    """Per ambiguity level: exact likelihoods where a respondent has them, else its sampled answers.

    Parameters
    ----------
    sampled_by_set, exact_by_set : dict {"low" | "high": DataFrame}
        :func:`moralkit.moralchoice.scenario_metrics` per level; the exact tables' respondent labels carry
        ``suffix``.
    suffix : str, optional
        The suffix that marks an exact respondent (default :data:`moralkit.respondents.EXACT_SUFFIX`).

    Returns
    -------
    dict {"low" | "high": DataFrame}
        The exact rows first, then the sampled rows of the respondents without exact likelihoods;
        levels with neither are left out.
    """
    import pandas as pd

    from .respondents import EXACT_SUFFIX

    suffix = EXACT_SUFFIX if suffix is None else suffix
    out = {}
    for a in ("low", "high"):
        ex, sm = exact_by_set.get(a), sampled_by_set.get(a)
        have = set(ex["model"].str.removesuffix(suffix)) if ex is not None else set()
        parts = [ex] if ex is not None else []
        if sm is not None:
            parts.append(sm[~sm["model"].isin(have)])
        if parts:
            out[a] = pd.concat(parts, ignore_index=True)
    return out
