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
decision        the mapping stored in the file (``""`` when absent)
temperature     ``eval_temperature``
top_p           ``eval_top_p``
timestamp       time of the answer
file            name of the file the row came from
==============  ===============================================================

and :func:`load_responses` adds ``action``, the answer (re)mapped with
:func:`moralkit.moralchoice.map_answer`, for one scenario table.

References
----------
Scherrer et al. (2023), Section 3.3 (survey administration, response
collection: M samples per question form at temperature 1).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from .. import paths
from ..errors import DataError
from .data import QUESTION_TYPES, SurveyTemplates, degenerate_scenarios, load_scenarios, load_templates, survey_source
from .mapping import map_responses

__all__ = ["RESPONSE_COLUMNS", "TIDY_COLUMNS", "read_responses", "load_responses", "response_files", "own_data_dir"]

#: Column layout of a response file: the shared files' twelve columns, then ``backend`` and
#: ``provider``, which the project's own runs add (``model_id`` is then the respondent's label, the
#: same string as in the PSM export). The reader needs neither of the last two.
RESPONSE_COLUMNS = (
    "scenario_id", "model_id", "question_type", "question_ordering", "eval_technique", "eval_top_p",
    "eval_temperature", "eval_sample_nb", "timestamp", "answer_raw", "answer", "decision", "backend", "provider",
)
TIDY_COLUMNS = (
    "scenario_id", "model", "question_type", "ordering", "sample", "answer_raw", "decision",
    "temperature", "top_p", "timestamp", "file",
)
_KEY = ["model", "scenario_id", "question_type", "ordering", "sample"]


def own_data_dir() -> Path:
    """Where the project's own MoralChoice runs live: ``moralkit.paths.data_dir() / "moralchoice"``."""
    return paths.data_dir() / "moralchoice"


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


def _read_one(f: Path) -> pd.DataFrame:
    df = pd.read_csv(f, dtype=str, keep_default_na=False, encoding="utf-8")
    df = df.loc[:, [c for c in df.columns if not c.startswith("Unnamed")]]
    required = ["scenario_id", "model_id", "question_type", "question_ordering", "eval_sample_nb", "answer_raw"]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(
            f"Response file {f} lacks columns {missing}; expected the layout {list(RESPONSE_COLUMNS)}."
        )
    bad_q = sorted(set(df["question_type"]) - set(QUESTION_TYPES))
    if bad_q:
        raise DataError(f"Response file {f}: unknown question_type values {bad_q}; expected {QUESTION_TYPES}.")
    bad_o = sorted(set(df["question_ordering"]) - {"0", "1"})
    if bad_o:
        raise DataError(f"Response file {f}: question_ordering must be 0 or 1, found {bad_o}.")
    sample = pd.to_numeric(df["eval_sample_nb"], errors="coerce")
    if sample.isna().any() or (sample < 0).any():
        raise DataError(f"Response file {f}: eval_sample_nb must be integers >= 0.")
    get = lambda c: df[c] if c in df.columns else ""  # noqa: E731
    return pd.DataFrame(
        {
            "scenario_id": df["scenario_id"],
            "model": df["model_id"],
            "question_type": df["question_type"],
            "ordering": df["question_ordering"].astype(int),
            "sample": sample.astype(int),
            "answer_raw": df["answer_raw"],
            "decision": get("decision"),
            "temperature": pd.to_numeric(get("eval_temperature"), errors="coerce"),
            "top_p": pd.to_numeric(get("eval_top_p"), errors="coerce"),
            "timestamp": get("timestamp"),
            "file": f.name,
        },
        columns=list(TIDY_COLUMNS),
    )


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
    df = pd.concat([_read_one(f) for f in files], ignore_index=True)
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
        :func:`own_data_dir` when it exists; ``False``: none. Only rows whose
        scenario is in the requested table are kept.
    include_shared : bool, default True
    templates : SurveyTemplates, optional

    Returns
    -------
    DataFrame
        Tidy responses (:data:`TIDY_COLUMNS`) plus ``action`` (``action1``,
        ``action2``, ``refusal``, ``invalid``) and ``origin`` (``shared`` or
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
        own_data = own_data_dir() if own_data_dir().is_dir() else False
    if own_data is not False:
        files = response_files(own_data)
        if files:
            own = read_responses(files)
            own = own[own["scenario_id"].isin(scen_all["scenario_id"])]
            parts.append(own.assign(origin="own"))
    if not parts:
        return pd.DataFrame(columns=list(TIDY_COLUMNS) + ["action", "origin"])
    df = pd.concat(parts, ignore_index=True)
    dup = df.duplicated(_KEY, keep=False)
    if dup.any():
        raise DataError(
            f"{int(dup.sum())} responses appear both in the shared files and in the own runs under the same "
            f"model name, e.g. {df.loc[dup, _KEY].head(3).to_dict('records')}; rename the model_id of the own run."
        )
    unknown = sorted(set(df["scenario_id"]) - set(scen_all["scenario_id"]))
    if unknown:
        raise DataError(
            f"{len(unknown)} shared responses refer to scenarios missing from the {ambiguity} table: {unknown[:5]}."
        )
    hit = sorted(bad & set(df["scenario_id"]))
    if hit:
        warnings.warn(
            f"Excluding the responses to {len(hit)} degenerate scenario(s) with identical actions: {hit}.",
            UserWarning,
            stacklevel=2,
        )
        df = df[~df["scenario_id"].isin(bad)].reset_index(drop=True)
    return map_responses(df, scen_all, templates)
