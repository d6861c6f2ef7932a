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
from ..checks import check_choice
from ..errors import DataError, MoralkitError
from ..runs import run_dir
from .data import QUESTION_TYPES, SurveyTemplates, load_templates
from .mapping import map_answer, short_form
from .prompts import check_form

__all__ = ["ANSWER_SETS", "CANONICAL_ANSWERS", "ESTIMATORS", "LIKELIHOOD_COLUMNS", "canonical_answers",
           "combine_logprobs", "likelihood_table", "read_likelihoods", "write_likelihoods", "load_likelihoods"]

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
    check_choice(answers, ANSWER_SETS, "answers")
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
    """A tidy likelihood table (:data:`LIKELIHOOD_COLUMNS`) from per-form dicts (or a DataFrame of such rows, not
    modified), validated and sorted.

    Each row holds ``model``, ``scenario_id``, ``question_type``, ``ordering`` and
    the keys of :func:`combine_logprobs`; ``form`` and ``estimator``
    (``"token_probability"``) are filled in when absent.
    """
    # a DataFrame (the readers' concatenated files) is used as it is, not rebuilt from its records
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        return pd.DataFrame(columns=list(LIKELIHOOD_COLUMNS))
    need = ["model", "scenario_id", "question_type", "ordering", "mass_action1", "mass_action2", "p_action1"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(f"likelihood rows lack {missing}; build them with combine_logprobs().")
    bad = sorted(set(df["question_type"].unique()) - set(QUESTION_TYPES))
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
    return likelihood_table(pd.concat(frames, ignore_index=True))


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
    check_choice(ambiguity, ("low", "high", "controversial"), "ambiguity")
    from pathlib import Path

    d = Path(path) if path is not None else run_dir("likelihoods")
    files = sorted(d.glob(f"*-{ambiguity}.csv.gz")) if d.is_dir() else []
    if not files:
        return pd.DataFrame(columns=list(LIKELIHOOD_COLUMNS))
    return likelihood_table(pd.concat([pd.read_csv(f, keep_default_na=False) for f in files], ignore_index=True))
