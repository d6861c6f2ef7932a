"""Exact action likelihoods from token probabilities (Definition 1 without sampling).

The paper estimates the action likelihood p(a | z(x)) by sampling M answers at
temperature 1 and mapping them to actions (eq. 7). A model whose token
probabilities are available (a local model, or an API that returns logprobs)
allows the sum of Definition 1 to be computed directly, over a finite set of
*canonical answers*:

    p_hat(a | z(x)) = sum over canonical answers s with g(s) = a of p(s <eos> | z(x)),

where p(s <eos> | z(x)) is the probability that the model answers exactly ``s``
and then ends its turn (teacher forcing; any end-of-turn token of the model
counts). Distinct complete answers are disjoint events, so

* ``mass_action1 + mass_action2 = covered <= 1``, and
* ``uncovered = 1 - covered`` is the probability of every other answer: other
  spellings, refusals, invalid answers. The estimator reports it, so it says
  how much of the model's distribution it misses.

The likelihood used by the metrics is the conditional one,
``p_action1 = mass_action1 / covered``, the counterpart of eq. 7, which also
conditions on a valid answer (refusals and invalid answers are excluded,
Section 3.3). When ``covered`` underflows to 0 the form gets 0.5 for both
actions, as a form with no valid answer does in the paper.

Canonical answers
    Every canonical answer is a spelling of the survey's own response templates
    (``response_templates/*.json``), so the mapping g of Appendix B.2 maps it by
    exact match; its action is taken from :func:`map_answer` itself. Two sets:

    ``"canonical"`` (default)
        ``ab``: ``A``, ``A.``, ``a``, ``a.``, ``A. <option>`` and the same for B;
        ``compare``: ``Yes``, ``Yes.``, ``yes``, ``yes.`` and the same for no;
        ``repeat``: the option text, with and without its final period.
        These are the answers the committed samples of the local models give
        (``data/moralchoice``): 77-99 % of their sampled answers are one of these
        strings exactly (Qwen2.5-Coder-0.5B: A/B 77-83 %, yes/no 98-99 %, repeat
        79-86 %; 1.5B: 95-99 %); most of the others are ``A. <option>`` answers
        cut off by the 8-token cap of the sampling runs.
    ``"templates"``
        Every spelling of the response templates (31 per option for ``ab``),
        with the placeholders filled. More coverage, about 4x the tokens.

References
----------
Scherrer et al. (2023), Definition 1 (eq. 1), Section 2.3 (eq. 7, why the paper
samples: "computationally intractable" sums and APIs without token
probabilities), Section 3.3 (temperature 1, invalid answers excluded, 0.5 for
forms without a valid answer), Appendix B.2 (the mapping g).
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pandas as pd

from ..atomicfile import atomic_path
from ..errors import DataError, MoralkitError
from ..figures import format_interval
from ..runs import run_dir
from .data import QUESTION_TYPES, SurveyTemplates, load_templates
from .mapping import map_answer, short_form
from .prompts import check_form

__all__ = ["ANSWER_SETS", "CANONICAL_ANSWERS", "ESTIMATORS", "LIKELIHOOD_COLUMNS", "canonical_answers",
           "combine_logprobs", "compare_estimators", "compare_at_paper_m", "agreement_summary", "likelihood_table", "read_likelihoods",
           "write_likelihoods", "load_likelihoods"]

#: Names of the estimators recorded by :func:`moralkit.moralchoice.scenario_metrics`.
ESTIMATORS = ("sampling", "token_probability", "top_logprobs")

#: The answer sets :func:`canonical_answers` knows.
ANSWER_SETS = ("canonical", "templates")

#: The default canonical answers per question type, as response-template spellings of the first option
#: shown (``{optionA}``); the second option's spellings are the same with A -> B, yes -> no.
CANONICAL_ANSWERS = {
    "ab": (("A", "A.", "a", "a.", "A. {optionA}"), ("B", "B.", "b", "b.", "B. {optionB}")),
    "compare": (("Yes", "Yes.", "yes", "yes."), ("No", "No.", "no", "no.")),
    "repeat": (("{optionA}", "{optionA_short}"), ("{optionB}", "{optionB_short}")),
}

#: Columns of a tidy likelihood table (one row per model, scenario and question form).
LIKELIHOOD_COLUMNS = ("model", "scenario_id", "question_type", "ordering", "form", "mass_action1", "mass_action2",
                      "covered", "uncovered", "p_action1", "p_action2", "n_answers", "estimator")


def canonical_answers(scenario, question_type: str, ordering: int, templates: SurveyTemplates | None = None,
                      answers: str = "canonical") -> list[tuple[str, str]]:
    """The canonical answers of one question form and the action each one chooses.

    Parameters
    ----------
    scenario : mapping or pandas Series
        Holds ``action1`` and ``action2`` (a row of :func:`load_scenarios`).
    question_type : {"ab", "repeat", "compare"}
    ordering : {0, 1}
        0 shows ``action1`` first.
    templates : SurveyTemplates, optional
        Default :func:`load_templates` ``()``.
    answers : {"canonical", "templates"}
        Which spellings (see the module docstring).

    Returns
    -------
    list of (answer, action)
        Distinct answer strings, in template order, with ``action`` in
        ``{"action1", "action2"}`` as :func:`map_answer` maps them (the ordering
        undone).

    Raises
    ------
    ValueError
        Unknown question type, ordering or answer set, or a canonical answer that
        the mapping does not send to an action (e.g. two identical actions).

    Examples
    --------
    >>> sc = {"action1": "I stay.", "action2": "I leave."}
    >>> canonical_answers(sc, "repeat", 1)
    [('I leave.', 'action2'), ('I leave', 'action2'), ('I stay.', 'action1'), ('I stay', 'action1')]
    """
    question_type, ordering = check_form(question_type, ordering)
    if answers not in ANSWER_SETS:
        raise MoralkitError(f"answers must be one of {ANSWER_SETS}, got {answers!r}.")
    a1, a2 = scenario["action1"], scenario["action2"]
    if not isinstance(a1, str) or not isinstance(a2, str):
        raise MoralkitError("scenario must hold the action texts 'action1' and 'action2' (str).")
    if a1.strip() == a2.strip():
        raise DataError(f"the scenario's two actions must differ, both are {a1!r} (load_scenarios() drops "
                         "degenerate scenarios).")
    templates = templates or load_templates()
    first, second = (a1, a2) if ordering == 0 else (a2, a1)
    fill = dict(optionA=first, optionA_short=short_form(first), optionB=second, optionB_short=short_form(second))
    if answers == "canonical":
        spell_a, spell_b = CANONICAL_ANSWERS[question_type]
    else:
        spell_a, spell_b = templates.responses[question_type]["A"], templates.responses[question_type]["B"]
    out, seen = [], set()
    for t in (*spell_a, *spell_b):
        s = t.format(**fill).strip()
        if not s or s in seen:
            continue
        seen.add(s)
        d = map_answer(s, question_type, ordering, a1, a2, templates)
        if d not in ("action1", "action2"):
            raise DataError(f"the canonical answer {s!r} maps to {d!r}, not to an action; the scenario's two "
                             "actions must differ (load_scenarios() drops degenerate scenarios).")
        out.append((s, d))
    return out


def combine_logprobs(logprobs, actions) -> dict:
    """Action masses and likelihoods of one question form from its answers' log-probabilities.

    Parameters
    ----------
    logprobs : array_like of float
        Natural-log probability of each canonical answer followed by end of turn
        (``-inf`` allowed).
    actions : sequence of {"action1", "action2"}
        The action of each answer.

    Returns
    -------
    dict
        ``mass_action1``, ``mass_action2`` (sums of probabilities), ``covered``
        (their sum, at most 1), ``uncovered`` (1 - covered), ``p_action1``,
        ``p_action2`` (masses divided by ``covered``; 0.5 each when
        ``covered`` is 0), ``n_answers``.

    Examples
    --------
    >>> r = combine_logprobs([math.log(0.6), math.log(0.1), math.log(0.2)], ["action1", "action1", "action2"])
    >>> round(r["covered"], 12), round(r["p_action1"], 12)
    (0.9, 0.777777777778)
    """
    lp = np.asarray(logprobs, dtype=float)
    acts = np.asarray(list(actions))
    if lp.ndim != 1 or lp.shape != acts.shape or lp.size == 0:
        raise MoralkitError("logprobs and actions must be non-empty sequences of the same length.")
    if np.any(np.isnan(lp)) or np.any(lp > 1e-9):
        raise MoralkitError("logprobs must be log-probabilities (<= 0, not NaN).")
    bad = sorted(set(acts.tolist()) - {"action1", "action2"})
    if bad:
        raise MoralkitError(f"actions must be 'action1' or 'action2', got {bad}.")
    lp = np.minimum(lp, 0.0)
    # Sums of probabilities in decimal arithmetic at 40 significant digits, each result rounded once to a
    # float: the table depends on the recorded log-probabilities alone, not on the CPU or the numpy build
    # (numpy's vectorised exp gives different last bits on AVX-512 and AVX2 machines).
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        mass = {a: sum((decimal.Decimal(v).exp() for v, b in zip(lp.tolist(), acts.tolist())
                        if b == a and v != -math.inf), decimal.Decimal(0)) for a in ("action1", "action2")}
        total = mass["action1"] + mass["action2"]
        m1, m2 = float(mass["action1"]), float(mass["action2"])
        covered = min(1.0, float(total))
        p1 = 0.5 if total == 0 else float(mass["action1"] / total)
    return dict(mass_action1=m1, mass_action2=m2, covered=covered, uncovered=1.0 - covered, p_action1=p1,
                p_action2=1.0 - p1, n_answers=int(lp.size))


def likelihood_table(rows) -> pd.DataFrame:
    """A tidy likelihood table (:data:`LIKELIHOOD_COLUMNS`) from per-form dicts, validated and sorted.

    Each row holds ``model``, ``scenario_id``, ``question_type``, ``ordering`` and
    the keys of :func:`combine_logprobs`; ``form`` and ``estimator``
    (``"token_probability"``) are filled in when absent.
    """
    df = pd.DataFrame(list(rows))
    if df.empty:
        return pd.DataFrame(columns=list(LIKELIHOOD_COLUMNS))
    need = ["model", "scenario_id", "question_type", "ordering", "mass_action1", "mass_action2", "p_action1"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(f"likelihood rows lack {missing}; build them with combine_logprobs().")
    bad = sorted(set(df["question_type"]) - set(QUESTION_TYPES))
    if bad:
        raise MoralkitError(f"unknown question types {bad}; expected {QUESTION_TYPES}.")
    df["ordering"] = df["ordering"].astype(int)
    df["form"] = df["question_type"].astype(str) + ":" + df["ordering"].astype(str)
    if "covered" not in df.columns:
        df["covered"] = df["mass_action1"] + df["mass_action2"]
    df["uncovered"] = 1.0 - df["covered"]
    df["p_action2"] = 1.0 - df["p_action1"]
    if "estimator" not in df.columns:
        df["estimator"] = "token_probability"
    if "n_answers" not in df.columns:
        df["n_answers"] = 0
    if (df["covered"] > 1 + 1e-9).any() or (df["covered"] < 0).any():
        raise DataError("covered probability mass must lie in [0, 1].")
    df = df.sort_values(["model", "scenario_id", "question_type", "ordering"], kind="stable")
    return df[list(LIKELIHOOD_COLUMNS)].reset_index(drop=True)


def write_likelihoods(df: pd.DataFrame, path):
    """Write a likelihood table as a deterministic ``.csv.gz`` (floats with 17 significant digits).

    The file is written to a temporary name and renamed, so a kill mid-export leaves the previous file intact.
    """
    from pathlib import Path

    df = likelihood_table(df.to_dict("records"))
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.17g", compression={"method": "gzip", "mtime": 0})
    return Path(path)


def read_likelihoods(path) -> pd.DataFrame:
    """Read likelihood tables (a ``.csv.gz`` file or a directory of them) into one validated table."""
    from pathlib import Path

    path = Path(path)
    files = sorted(path.glob("*.csv.gz")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no likelihood files (*.csv.gz) in {path}")
    frames = [pd.read_csv(f, keep_default_na=False) for f in files]
    return likelihood_table(pd.concat(frames, ignore_index=True).to_dict("records"))


def load_likelihoods(ambiguity: str, path=None) -> pd.DataFrame:
    """The committed token-probability likelihoods of one ambiguity level (files ``<respondent>-<ambiguity>.csv.gz``).

    Parameters
    ----------
    ambiguity : {"low", "high"}
    path : path-like, optional
        Directory of the tables (default: the committed runs, :func:`moralkit.runs.run_dir` ``("likelihoods")``).

    Returns
    -------
    DataFrame
        The tidy table (:data:`LIKELIHOOD_COLUMNS`) of every respondent, empty when
        there are none yet.
    """
    if ambiguity not in ("low", "high", "controversial"):
        raise MoralkitError(f"ambiguity must be 'low', 'high' or 'controversial', got {ambiguity!r}.")
    from pathlib import Path

    d = Path(path) if path is not None else run_dir("likelihoods")
    files = sorted(d.glob(f"*-{ambiguity}.csv.gz")) if d.is_dir() else []
    if not files:
        return pd.DataFrame(columns=list(LIKELIHOOD_COLUMNS))
    return likelihood_table(pd.concat([pd.read_csv(f, keep_default_na=False) for f in files],
                                      ignore_index=True).to_dict("records"))


def _pearson(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _spearman(x, y) -> float:
    from scipy.stats import rankdata

    return _pearson(rankdata(x), rankdata(y))


def _pearson_rows(x, Y) -> np.ndarray:
    """:func:`_pearson` of ``x`` with each row of ``Y`` (NaN where a row or ``x`` is constant)."""
    x, Y = np.asarray(x, float), np.asarray(Y, float)
    if len(x) < 3 or x.std() == 0:
        return np.full(len(Y), np.nan)
    xc = x - x.mean()
    Yc = Y - Y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc ** 2).sum()) * np.sqrt((Yc ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (Yc @ xc) / den
    return np.where(Y.std(axis=1) == 0, np.nan, r)


def _spearman_rows(x, Y) -> np.ndarray:
    from scipy.stats import rankdata

    return _pearson_rows(rankdata(x), rankdata(Y, axis=1))


#: Draws per chunk of the noise-band simulation (memory: chunk x answered forms).
_SIM_CHUNK = 500

#: Draws of the noise bands of :func:`compare_estimators`. Measured on the committed runs
#: (``benchmarks/bench_noise_bands.py``, seeds 0-4, 2026-11-26): with 200 draws the count of the 12
#: measures inside their bands moved with the seed (11, 12, 12, 12, 12); with 2,000 it was 12 at every
#: seed, the measure nearest an edge 0.0019-0.0024 inside it. 2,000 draws cost 9 CPU-s for both levels
#: (200: 2.6 s); 10,000 would cost about five times that in notebook 05 and the findings.
N_SIM = 2_000


def compare_estimators(likelihoods: pd.DataFrame, responses: pd.DataFrame, *, models=None, n_sim: int = N_SIM,
                       seed: int = 0, decision: str = "action") -> pd.DataFrame:
    """Agreement of the exact (token-probability) and the sampling estimators on the scenarios both cover.

    For each respondent present in both tables, on the common scenarios:

    * ``r_p``: Pearson correlation of the marginal action likelihoods (eq. 8),
      ``mad_p``: their mean absolute difference;
    * ``rho_qfc``, ``rho_qfe``: Spearman correlations of QF-C and QF-E (do the
      two estimators rank the scenarios alike?), with ``rho_qfc_sim``/``rho_qfe_sim``
      and their ``_lo``/``_hi`` range from sampling noise alone (below; NaN when
      the scenarios were not asked in the same forms);
    * ``qfe_exact``, ``qfe_sampled``: mean QF-E of each (sampling with M samples
      per form cannot exceed what M draws allow: with M = 1 it is 0), and
      ``qfe_sampled_sim``, the mean the sampled QF-E has when the answers are
      drawn from the exact likelihoods: the plug-in entropy of M draws is biased
      low, so ``qfe_sampled`` below ``qfe_exact`` by about ``qfe_exact -
      qfe_sampled_sim`` is the sampling estimator's bias, not a disagreement
      (the same for ``qfc_*``);
    * the same statistics **expected from sampling noise alone**: the sampled
      answers are redrawn ``n_sim`` times as Bernoulli draws from the exact
      likelihood of each form, with the sampled run's number of valid answers
      per form (forms without one stay at 0.5); ``r_p_sim`` and ``mad_p_sim``
      are their means, ``*_lo``/``*_hi`` their 2.5 / 97.5 % quantiles. An
      observed value inside that band means the two estimators agree up to the
      sampling noise of M.
    * ``brier``, ``brier_expected``, ``brier_z``: per sampled valid answer y
      (1 if action1), the mean (y - p)^2 with p the exact likelihood of its form,
      its expectation sum p(1 - p) / n if the answers were drawn from p, and the
      z-score (variance p(1 - p)(1 - 2p)^2 per answer).

    Parameters
    ----------
    likelihoods : DataFrame
        Token-probability likelihoods (:func:`read_likelihoods`).
    responses : DataFrame
        Mapped sampled responses (:func:`moralkit.moralchoice.load_responses`).
    models : list of str, optional
        Respondents to compare (default: all present in both).
    n_sim : int, default :data:`N_SIM`
        Draws of the noise bands.
    seed : int, default 0
        Seed of the noise bands; each respondent draws from its own stream (seed and label).
    decision : str, default "action"

    Returns
    -------
    DataFrame
        One row per respondent.

    References
    ----------
    Scherrer et al. (2023), eq. 7 (the sampling estimator), Definitions 1, 5, 6, Section 3.3 (M = 5 / 10).
    """
    from .metrics import action_likelihood, qf_consistency, qf_entropy, scenario_metrics

    if not len(likelihoods) or not len(responses):
        return pd.DataFrame()
    common_models = sorted(set(likelihoods["model"]) & set(responses["model"]))
    if models is not None:
        missing = sorted(set(models) - set(common_models))
        if missing:
            raise DataError(f"respondents {missing} are not in both tables; both hold {common_models}.")
        common_models = list(models)
    rows = []
    for m in common_models:
        # one stream per respondent: its noise band does not depend on which other respondents are compared
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 15, *str(m).encode()]))
        lk = likelihoods[likelihoods["model"] == m]
        rs = responses[responses["model"] == m]
        sc = sorted(set(lk["scenario_id"]) & set(rs["scenario_id"]))
        if len(sc) < 3:
            continue
        lk = lk[lk["scenario_id"].isin(sc)]
        rs = rs[rs["scenario_id"].isin(sc)]
        ex = scenario_metrics(lk).set_index("scenario_id").loc[sc]
        sa = scenario_metrics(rs, decision=decision).set_index("scenario_id").loc[sc]
        al = action_likelihood(rs, decision=decision)
        al = al[al["form"].isin(set(lk["form"]))]
        pf = lk.set_index(["scenario_id", "form"])["p_action1"]
        key = list(zip(al["scenario_id"], al["form"]))
        p_ex = pf.reindex(key).to_numpy()
        n_valid = al["n_valid"].to_numpy()
        ok = ~np.isnan(p_ex)
        # Brier score of the sampled valid answers against the exact form likelihoods
        y1 = al["p_action1"].to_numpy() * n_valid  # number of action1 answers among the valid ones
        nv, pp, k1 = n_valid[ok], p_ex[ok], y1[ok]
        n_ans = nv.sum()
        brier = ((k1 * (1 - pp) ** 2 + (nv - k1) * pp ** 2).sum() / n_ans) if n_ans else float("nan")
        b_exp = (nv * pp * (1 - pp)).sum() / n_ans if n_ans else float("nan")
        b_var = (nv * pp * (1 - pp) * (1 - 2 * pp) ** 2).sum() / n_ans ** 2 if n_ans else float("nan")
        # sampling noise alone: redraw the sampled answers from the exact likelihoods, in chunks of draws
        # (one call draws a chunk's rows in the same order as one call per draw would)
        sims_r, sims_d, sims_qfc, sims_qfe, mean_qfc, mean_qfe = [], [], [], [], [], []
        al_sc = al["scenario_id"].to_numpy()
        pos = {s: i for i, s in enumerate(sc)}
        order = np.array([pos[s] for s in al_sc])
        per_sc = np.bincount(order, minlength=len(sc))
        # rows are sorted by scenario then form; with the same forms everywhere they reshape to (scenario, form)
        z = int(per_sc[0]) if len(per_sc) and (per_sc == per_sc[0]).all() else 0
        member = np.zeros((len(order), len(sc)))
        member[np.arange(len(order)), order] = 1.0
        x_p = ex["p_action1"].to_numpy(dtype=float)
        p_draw = np.where(ok, p_ex, 0.5)
        for start in range(0, int(n_sim), _SIM_CHUNK):
            k = min(_SIM_CHUNK, int(n_sim) - start)
            draw = rng.binomial(n_valid, p_draw, size=(k, len(n_valid)))
            pf_sim = np.where(n_valid > 0, draw / np.maximum(n_valid, 1), 0.5)
            marg = (pf_sim @ member) / per_sc
            sims_r.append(_pearson_rows(x_p, marg))
            sims_d.append(np.mean(np.abs(marg - x_p), axis=1))
            if z:
                pz = pf_sim.reshape(k, len(sc), z)
                pz = np.stack([pz, 1.0 - pz], axis=-1)
                qfc_s, qfe_s = qf_consistency(pz), qf_entropy(pz)
                sims_qfc.append(_spearman_rows(ex["qf_consistency"].to_numpy(dtype=float), qfc_s))
                sims_qfe.append(_spearman_rows(ex["qf_entropy"].to_numpy(dtype=float), qfe_s))
                mean_qfc.append(qfc_s.mean(axis=1))
                mean_qfe.append(qfe_s.mean(axis=1))
        sims_r, sims_d = (np.concatenate(x) if x else np.array([]) for x in (sims_r, sims_d))
        sims_qfc, sims_qfe, mean_qfc, mean_qfe = (np.concatenate(x) if x else [] for x in
                                                  (sims_qfc, sims_qfe, mean_qfc, mean_qfe))

        def band(x):  # mean and 95 % range of a simulated statistic (NaN without simulations)
            x = np.asarray(x, float)
            if not len(x) or np.isnan(x).all():
                return np.nan, np.nan, np.nan
            return float(np.nanmean(x)), float(np.nanquantile(x, 0.025)), float(np.nanquantile(x, 0.975))
        rows.append(dict(
            model=m, n_scenarios=len(sc), samples_per_form=float(rs.groupby(["scenario_id", "question_type",
                                                                             "ordering"]).size().mean()),
            r_p=_pearson(ex["p_action1"], sa["p_action1"]),
            mad_p=float(np.mean(np.abs(ex["p_action1"] - sa["p_action1"]))),
            r_p_sim=float(np.nanmean(sims_r)) if n_sim else np.nan,
            r_p_sim_lo=float(np.nanquantile(sims_r, 0.025)) if n_sim else np.nan,
            r_p_sim_hi=float(np.nanquantile(sims_r, 0.975)) if n_sim else np.nan,
            mad_p_sim=float(np.mean(sims_d)) if n_sim else np.nan,
            mad_p_sim_lo=float(np.quantile(sims_d, 0.025)) if n_sim else np.nan,
            mad_p_sim_hi=float(np.quantile(sims_d, 0.975)) if n_sim else np.nan,
            rho_qfc=_spearman(ex["qf_consistency"], sa["qf_consistency"]),
            **dict(zip(("rho_qfc_sim", "rho_qfc_sim_lo", "rho_qfc_sim_hi"), band(sims_qfc))),
            rho_qfe=_spearman(ex["qf_entropy"], sa["qf_entropy"]),
            **dict(zip(("rho_qfe_sim", "rho_qfe_sim_lo", "rho_qfe_sim_hi"), band(sims_qfe))),
            qfe_exact=float(ex["qf_entropy"].mean()), qfe_sampled=float(sa["qf_entropy"].mean()),
            qfe_sampled_sim=float(np.mean(mean_qfe)) if len(mean_qfe) else np.nan,
            qfc_exact=float(ex["qf_consistency"].mean()), qfc_sampled=float(sa["qf_consistency"].mean()),
            qfc_sampled_sim=float(np.mean(mean_qfc)) if len(mean_qfc) else np.nan,
            covered=float(lk["covered"].mean()),
            brier=float(brier), brier_expected=float(b_exp),
            brier_z=float((brier - b_exp) / math.sqrt(b_var)) if n_ans and b_var > 0 else float("nan"),
        ))
    return pd.DataFrame(rows)


def compare_at_paper_m(likelihoods: pd.DataFrame, responses: pd.DataFrame, ambiguity: str, *, seed: int = 0,
                       fallback: bool = True, n_sim: int = N_SIM) -> pd.DataFrame:
    """:func:`compare_estimators` on the sampled answers at the paper's M, per respondent.

    A respondent's answers count at the paper's M (5 low, 10 high) on the scenarios answered that many
    times in every form (:func:`moralkit.moralchoice.with_samples`). With ``fallback``, the respondents
    with no such scenario are compared on all their answers instead (M = 1 runs, where QF-E cannot agree).

    Parameters
    ----------
    likelihoods : DataFrame
        Exact likelihoods of one ambiguity level (:func:`load_likelihoods`).
    responses : DataFrame
        Sampled answers of the same level (:func:`moralkit.moralchoice.load_responses`).
    ambiguity : {"low", "high"}
    seed : int
        Seed of the noise bands (:func:`compare_estimators`).
    fallback : bool, default True
    n_sim : int, default :data:`N_SIM`
        Draws of the noise bands (:func:`compare_estimators`).

    Returns
    -------
    DataFrame
        The columns of :func:`compare_estimators` and ``M`` (the paper's M, or 1), paper-M rows first.

    References
    ----------
    Scherrer et al. (2023), eq. 7 and Section 3.3 (M = 5 low, M = 10 high).
    """
    from .data import PAPER_SAMPLES
    from .responses import with_samples

    if ambiguity not in PAPER_SAMPLES:
        raise MoralkitError(f"ambiguity must be one of {sorted(PAPER_SAMPLES)}, got {ambiguity!r}")
    M = PAPER_SAMPLES[ambiguity]
    if not len(likelihoods) or not len(responses):
        return pd.DataFrame()
    at_m = with_samples(responses, M)
    parts = [(at_m, M)]
    if fallback:  # the respondents with no scenario at the paper's M
        parts.append((responses[~responses["model"].isin(set(at_m["model"]))], 1))
    out = [compare_estimators(likelihoods, r, seed=seed, n_sim=n_sim).assign(M=m) for r, m in parts if len(r)]
    out = [c for c in out if len(c)]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def agreement_summary(comparison: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """:func:`compare_estimators` as one readable cell per statistic: ``observed [noise band]``.

    Columns ``r_p``, ``mad_p``, ``rho_qfc``, ``rho_qfe`` read e.g. ``0.51 [0.49, 0.64]``: the observed value,
    then the 95 % range the statistic has when the sampled answers are redrawn from the exact likelihoods.
    An observed value inside its band means the two estimators agree up to the sampling noise of M.
    ``qfe: exact / sampled (expected)`` gives the mean QF-E of each estimator and, in brackets, the mean the
    sampled one has when the answers are drawn from the exact likelihoods (its bias at this M); the same
    for QF-C.

    Examples
    --------
    >>> c = pd.DataFrame({"model": ["m"], "n_scenarios": [200], "samples_per_form": [5.0], "r_p": [0.512],
    ...                   "r_p_sim_lo": [0.487], "r_p_sim_hi": [0.641], "covered": [0.92], "brier_z": [-0.56]})
    >>> agreement_summary(c).loc["m", "r_p"]
    '0.51 [0.49, 0.64]'
    """
    out = comparison.set_index("model")[["n_scenarios", "samples_per_form"]].copy()
    out["samples_per_form"] = out["samples_per_form"].round(1)
    for stat in ("r_p", "mad_p", "rho_qfc", "rho_qfe"):
        if stat not in comparison.columns:
            continue
        lo = comparison.get(f"{stat}_sim_lo", pd.Series(np.nan, index=comparison.index))
        hi = comparison.get(f"{stat}_sim_hi", pd.Series(np.nan, index=comparison.index))
        out[stat] = [format_interval(v, a, b, digits) for v, a, b in zip(comparison[stat], lo, hi)]
    for q in ("qfe", "qfc"):
        if {f"{q}_exact", f"{q}_sampled"} <= set(comparison.columns):
            sim = comparison.get(f"{q}_sampled_sim", pd.Series(np.nan, index=comparison.index))
            out[f"{q}: exact / sampled (expected)"] = [
                f"{a:.{digits}f} / {b:.{digits}f}" + ("" if np.isnan(c) else f" ({c:.{digits}f})")
                for a, b, c in zip(comparison[f"{q}_exact"], comparison[f"{q}_sampled"], sim)]
    for col in ("covered", "brier_z"):
        if col in comparison.columns:
            out[col] = comparison.set_index("model")[col].round(digits)
    return out
