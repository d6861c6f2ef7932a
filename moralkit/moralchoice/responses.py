"""Model responses to MoralChoice in one long, tidy format.

Response files (the shared ``responses/{high,controversial}/*.csv.gz`` and the
project's own collection runs in ``data/moralchoice/*.csv.gz``) have one row
per model answer and the columns

``scenario_id, model_id, question_type, question_ordering, eval_technique,
eval_top_p, eval_temperature, eval_sample_nb, timestamp, answer_raw, answer,
decision``

(``decision`` may be empty in files whose answers were not mapped). The project's
own runs add ``backend`` and ``provider``, and their ``model_id`` is the
respondent's label, as in the PSM export.
:func:`read_responses` turns any number of them into the tidy table

==============  ===============================================================
column          meaning
==============  ===============================================================
scenario_id     scenario key (see :func:`load_scenarios`)
model           ``model_id`` of the file
question_type   ``ab``, ``repeat`` or ``compare``
ordering        0 (action1 shown first) or 1 (swapped)
sample          ``eval_sample_nb``: index of the sample within the form
answer_raw      the model's answer text, as returned
stored_decision the file's ``decision``: the mapping stored with the answer (``""`` when absent)
temperature     ``eval_temperature``
top_p           ``eval_top_p``
timestamp       time of the answer
file            name of the file the row came from
==============  ===============================================================

and :func:`load_responses` adds ``decision``, the answer (re)mapped with
:func:`moralkit.moralchoice.map_answer`, for one scenario table.

**One name.** The mapped answer (one of :data:`moralkit.moralchoice.DECISIONS`) is called ``decision``
from the response files (the column of the MoralChoice authors' files and of every committed file) to
the tables and the metrics' ``column`` parameter. The value a file carries is kept beside it as
``stored_decision``, so that :func:`moralkit.moralchoice.decision_agreement` can compare the two.
(The collector's raw record keeps the survey-neutral field ``parsed``, which its export writes to
``decision``.) Before this rename the mapped column of the tables was ``action`` and the file's value
was ``decision`` in the tidy table.

References
----------
Scherrer et al. (2023), Section 3.3 (survey administration, response
collection: M samples per question form at temperature 1).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import runs
from ..checks import check_int
from ..errors import DataError
from .data import QUESTION_TYPES, SurveyTemplates, degenerate_scenarios, load_scenarios, load_templates, survey_source
from .mapping import DECISIONS, map_responses

__all__ = ["RESPONSE_COLUMNS", "TIDY_COLUMNS", "read_responses", "load_responses", "response_files"]

#: Column layout of a response file: the shared files' twelve columns, then ``backend`` and
#: ``provider``, which the project's own runs add (``model_id`` is then the respondent's label, the
#: same string as in the PSM export). The reader needs neither of the last two.
RESPONSE_COLUMNS = (
    "scenario_id", "model_id", "question_type", "question_ordering", "eval_technique", "eval_top_p",
    "eval_temperature", "eval_sample_nb", "timestamp", "answer_raw", "answer", "decision", "backend", "provider",
)
TIDY_COLUMNS = (
    "scenario_id", "model", "question_type", "ordering", "sample", "answer_raw", "stored_decision",
    "temperature", "top_p", "timestamp", "file",
)
_KEY = ["model", "scenario_id", "question_type", "ordering", "sample"]


def response_files(path) -> list[Path]:
    """The ``*.csv``/``*.csv.gz`` files of a file, a directory, or a list of them (sorted, no duplicates)."""
    if isinstance(path, (str, Path)):
        path = [path]
    out = []
    for p in path:
        p = Path(p)
        if p.is_dir():
            out += sorted(list(p.glob("*.csv.gz")) + list(p.glob("*.csv")))
        elif p.is_file():
            out.append(p)
        else:
            raise DataError(f"Response path {p} does not exist.")
    seen, files = set(), []
    for f in out:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            files.append(f)
    return files


_DECISIONS = {*DECISIONS, ""}  # a file's decision: a mapped value, or empty when it was not mapped


def _fix(f: Path) -> str:
    if f.parent.name == "moralchoice" and f.parent.parent.name == "data":
        return ("fix: re-export it from its run, `python -m moralkit export data/raw/<run> --out " + str(f) + "` "
                "(data/README.md lists each file's run), or restore it from git")
    return "fix: restore the file from its source (or remove it from the response directory)"


def _read_one(f: Path) -> pd.DataFrame:
    """Read and check one response file; every problem names the file, the row (CSV line) and the fix."""
    import gzip
    import zlib

    try:
        df = pd.read_csv(f, dtype=str, keep_default_na=False, encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise DataError(f"Response file {f} is empty (no header, no rows); {_fix(f)}.") from None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise DataError(f"Response file {f} cannot be read as a CSV ({type(e).__name__}: {str(e)[:120]}): it is "
                         f"truncated, not gzip, or not a response file; {_fix(f)}.") from None
    df = df.loc[:, [c for c in df.columns if not c.startswith("Unnamed")]]
    required = ["scenario_id", "model_id", "question_type", "question_ordering", "eval_sample_nb", "answer_raw"]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(
            f"Response file {f} lacks columns {missing}; expected the layout {list(RESPONSE_COLUMNS)}."
        )
    if not len(df):
        raise DataError(f"Response file {f} has a header but no rows; {_fix(f)}.")

    def fail(mask, what):
        i = int(np.flatnonzero(np.asarray(mask))[0])
        raise DataError(f"Response file {f}, row {i + 2} (scenario {df['scenario_id'].iat[i]!r}): {what}; "
                         f"{_fix(f)}.")

    bad_q = ~df["question_type"].isin(QUESTION_TYPES)
    if bad_q.any():
        fail(bad_q, f"unknown question_type {df['question_type'][bad_q].iat[0]!r}; expected one of {QUESTION_TYPES}")
    bad_o = ~df["question_ordering"].isin(["0", "1"])
    if bad_o.any():
        fail(bad_o, f"question_ordering must be 0 or 1, got {df['question_ordering'][bad_o].iat[0]!r}")
    bad_s = ~df["eval_sample_nb"].str.fullmatch(r"\d+")
    if bad_s.any():
        fail(bad_s, f"eval_sample_nb must be an integer >= 0, got {df['eval_sample_nb'][bad_s].iat[0]!r}")
    if (df["scenario_id"] == "").any() or (df["model_id"] == "").any():
        fail((df["scenario_id"] == "") | (df["model_id"] == ""), "scenario_id and model_id must not be empty")
    if "decision" in df.columns:
        bad_d = ~df["decision"].isin(_DECISIONS)
        if bad_d.any():
            fail(bad_d, f"decision must be one of {sorted(_DECISIONS - {''})} or empty, got "
                        f"{df['decision'][bad_d].iat[0]!r}")
    key = ["model_id", "scenario_id", "question_type", "question_ordering", "eval_sample_nb"]
    dup = df.duplicated(key, keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        first = int(np.flatnonzero((df[key] == df[key].iloc[i]).all(axis=1).to_numpy())[0])
        same = df.iloc[i]["answer_raw"] == df.iloc[first]["answer_raw"]
        fail(dup, f"the answer to (scenario, question type, ordering, sample) = ({df['scenario_id'].iat[i]}, "
                  f"{df['question_type'].iat[i]}, {df['question_ordering'].iat[i]}, {df['eval_sample_nb'].iat[i]}) "
                  f"of {df['model_id'].iat[i]!r} appears twice ({'the same answer' if same else 'conflicting answers'}"
                  f", first at row {first + 2})")
    sample = df["eval_sample_nb"].astype(int)
    get = lambda c: df[c] if c in df.columns else ""  # noqa: E731
    return pd.DataFrame(
        {
            "scenario_id": df["scenario_id"],
            "model": df["model_id"],
            "question_type": df["question_type"],
            "ordering": df["question_ordering"].astype(int),
            "sample": sample,
            "answer_raw": df["answer_raw"],
            "stored_decision": get("decision"),
            "temperature": pd.to_numeric(get("eval_temperature"), errors="coerce"),
            "top_p": pd.to_numeric(get("eval_top_p"), errors="coerce"),
            "timestamp": get("timestamp"),
            "file": f.name,
        },
        columns=list(TIDY_COLUMNS),
    )


#: The files read in this process, by path and content hash: notebook 05 reads the own runs for each of three
#: levels, notebook 07 for two (issue 30). A changed file has another key and is read again.
_READ: dict = {}


def _read_cached(f: Path) -> pd.DataFrame:
    """:func:`_read_one` of ``f``, each file content parsed and checked once per process (a copy is returned;
    hashing the bytes costs about a hundredth of parsing them)."""
    import hashlib

    key = (str(f.resolve()), hashlib.blake2b(f.read_bytes(), digest_size=16).digest())
    df = _READ.get(key)
    if df is None:
        if len(_READ) >= 64:
            _READ.clear()
        df = _READ[key] = _read_one(f)
    return df.copy()


def read_responses(path) -> pd.DataFrame:
    """Read response files into the tidy table (one row per answer).

    Parameters
    ----------
    path : str, Path, or iterable of them
        Response files (``.csv`` or ``.csv.gz``) or directories holding them.

    Returns
    -------
    DataFrame
        Columns :data:`TIDY_COLUMNS`; answers are kept as text (empty answers
        stay ``""``).

    Raises
    ------
    ValueError
        On missing columns, unknown question types or orderings, or an answer
        recorded twice for the same (model, scenario, question type, ordering,
        sample).
    """
    files = response_files(path)
    if not files:
        raise DataError(f"No response files (*.csv, *.csv.gz) found in {path}.")
    df = pd.concat([_read_cached(f) for f in files], ignore_index=True)
    dup = df.duplicated(_KEY, keep=False)
    if dup.any():
        ex = df.loc[dup, _KEY + ["file"]].head(6).to_string(index=False)
        raise DataError(
            f"{int(dup.sum())} responses share the same (model, scenario_id, question_type, ordering, sample), "
            f"e.g.\n{ex}\nRemove duplicated files or renumber eval_sample_nb."
        )
    return df


def load_responses(
    ambiguity: str = "high",
    source=None,
    own_data=None,
    include_shared: bool = True,
    templates: SurveyTemplates | None = None,
) -> pd.DataFrame:
    """All responses to one scenario table, mapped to actions.

    Parameters
    ----------
    ambiguity : {"low", "high", "controversial"}
    source : str, path-like or None
        Survey source (:func:`moralkit.moralchoice.survey_source`); its
        ``responses/<ambiguity>/`` files are included when present and
        ``include_shared`` is true.
    own_data : path, False or None
        The project's own runs (files in the response layout). ``None``:
        the committed runs (:func:`moralkit.runs.run_dir` ``("responses")``) when they exist; ``False``: none. Only rows whose
        scenario is in the requested table are kept.
    include_shared : bool, default True
    templates : SurveyTemplates, optional

    Returns
    -------
    DataFrame
        Tidy responses (:data:`TIDY_COLUMNS`) plus ``decision`` (``action1``,
        ``action2``, ``refusal``, ``invalid``: the answer mapped by
        :func:`moralkit.moralchoice.map_answer`) and ``origin`` (``shared`` or
        ``own``). Degenerate scenarios (identical actions) are excluded with a
        warning. Empty (with the columns) when no response is available.
    """
    src = survey_source(source)
    scen_all = load_scenarios(ambiguity, src, exclude_degenerate=False)
    bad = set(degenerate_scenarios(scen_all))
    templates = templates or load_templates(src)
    parts = []
    if include_shared and hasattr(src, "root"):
        d = Path(src.root) / "responses" / ambiguity
        if d.is_dir() and response_files(d):
            parts.append(read_responses(d).assign(origin="shared"))
    if own_data is None:
        own_data = runs.own_runs("responses")
    if own_data is not False:
        files = response_files(own_data)
        if files:
            own = read_responses(files)
            own = own[own["scenario_id"].isin(scen_all["scenario_id"])]
            parts.append(own.assign(origin="own"))
    if not parts:
        return pd.DataFrame(columns=list(TIDY_COLUMNS) + ["decision", "origin"])
    df = pd.concat(parts, ignore_index=True)
    dup = df.duplicated(_KEY, keep=False)
    if dup.any():
        raise DataError(
            f"{int(dup.sum())} responses appear both in the shared files and in the own runs under the same "
            f"model name, e.g. {df.loc[dup, _KEY].head(3).to_dict('records')}; rename the model_id of the own run."
        )
    unknown = sorted(set(df["scenario_id"].unique()) - set(scen_all["scenario_id"].unique()))
    if unknown:
        raise DataError(
            f"{len(unknown)} shared responses refer to scenarios missing from the {ambiguity} table: {unknown[:5]}."
        )
    hit = sorted(bad & set(df["scenario_id"].unique()))
    if hit:
        warnings.warn(
            f"Excluding the responses to {len(hit)} degenerate scenario(s) with identical actions: {hit}.",
            UserWarning,
            stacklevel=2,
        )
        df = df[~df["scenario_id"].isin(bad)].reset_index(drop=True)
    return map_responses(df, scen_all, templates)


def samples_per_form(responses: pd.DataFrame) -> pd.DataFrame:
    """How many answers each model gave per question form: M of the sampling estimator (eq. 7).

    Returns
    -------
    DataFrame
        One row per model (index ``model``): ``M_min`` and ``M_max`` (the fewest and most answers of
        one (scenario, form)), ``scenarios`` (scenarios answered) and, for every M that occurs,
        ``scenarios_M<k>``: the scenarios whose every form holds at least k answers.

    References
    ----------
    Scherrer et al. (2023), Section 3.3: M = 5 answers per form for low- and M = 10 for high-ambiguity
    scenarios. With M = 1 a form's likelihood is 0 or 1 and QF-E is 0 by construction.

    Examples
    --------
    >>> r = pd.DataFrame({"model": ["a"] * 5, "scenario_id": ["s1", "s1", "s1", "s2", "s2"],
    ...                   "question_type": ["ab"] * 5, "ordering": [0, 0, 1, 0, 1], "sample": [0, 1, 0, 0, 0]})
    >>> samples_per_form(r).loc["a"].to_dict()
    {'M_min': 1, 'M_max': 2, 'scenarios': 2, 'scenarios_M1': 2, 'scenarios_M2': 0}
    """
    cols = ["model", "scenario_id", "question_type", "ordering"]
    if not len(responses):
        return pd.DataFrame(columns=["M_min", "M_max", "scenarios"])
    n = responses.groupby(cols).size()
    per_scenario = n.groupby(["model", "scenario_id"]).min()  # the least-sampled form of each scenario
    out = n.groupby("model").agg(M_min="min", M_max="max")
    out["scenarios"] = per_scenario.groupby("model").size()
    for k in sorted(set(n.unique())):
        out[f"scenarios_M{k}"] = (per_scenario >= k).groupby("model").sum()
    return out.astype(int)


def with_samples(responses: pd.DataFrame, samples: int) -> pd.DataFrame:
    """The responses of the scenarios a model answered at least ``samples`` times in every form it was asked.

    A run extended to the paper's M in random scenario order (``run_moralchoice(order="shuffled")``)
    holds some scenarios at the new M and the rest at the old one; the sampling estimator's QF-E is
    only comparable between scenarios with the same M, so analyses at the paper's M keep those.
    Only the first ``samples`` answers (by sample number) of each form are kept.

    References
    ----------
    Scherrer et al. (2023), eq. 7 and Section 3.3 (M = 5 low, M = 10 high).
    """
    samples = check_int(samples, "samples", minimum=1)
    if not len(responses):
        return responses
    cols = ["model", "scenario_id", "question_type", "ordering"]
    ranked = responses.assign(_k=responses.groupby(cols)["sample"].rank(method="first"))
    n = ranked.groupby(cols).size().groupby(["model", "scenario_id"]).min()
    keep = n.index[(n >= int(samples)).to_numpy()]
    mask = pd.MultiIndex.from_arrays([ranked["model"], ranked["scenario_id"]]).isin(keep)
    out = ranked[mask & (ranked["_k"] <= int(samples)).to_numpy()]
    return out.drop(columns="_k").reset_index(drop=True)
