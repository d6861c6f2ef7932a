"""MoralChoice survey files: scenarios, question and response templates.

The survey (Scherrer et al. 2023) is read from one of three places, tried in
this order when ``source=None``:

1. the directory named by the environment variable ``MORALKIT_MORALCHOICE_DIR``;
2. ``<project root>/../shared/moralchoice`` when it exists
   (:func:`moralkit.paths.moralchoice_dir` resolves 1 and 2);
3. the Hugging Face dataset ``ninoscherrer/moralchoice`` (files
   ``scenarios/moralchoice_{low,high}_ambiguity.csv`` and
   ``question_templates/{ab,compare,repeat}.json``), downloaded with
   :func:`huggingface_hub.hf_hub_download` and cached by it. The files the hub
   dataset does not hold (``response_templates/`` of the original repository
   ninodimontalcino/moralchoice and the controversial subset of the fork
   jacksondean17/moralchoice) are fetched from GitHub at pinned commits and
   cached under ``$MORALKIT_CACHE_DIR`` (default ``~/.cache/moralkit``).

A directory holds the layout of ``../shared/moralchoice`` (see its README)::

    scenarios/moralchoice_{low,high,controversial}_ambiguity.csv
    question_templates/{ab,compare,repeat}.json
    response_templates/{ab,compare,repeat}.json, refusals.txt
    responses/{high,controversial}/*.csv.gz          (optional)

Pass ``source="hf"`` to force the hub, or any directory path.

References
----------
Scherrer, Shi, Feder, Blei (2023), "Evaluating the Moral Beliefs Encoded in
LLMs", Section 3.2 (survey generation), Appendix A (scenarios and labels),
Appendix B (question templates, Tables 12-13; answer mapping, B.2).
"""

from __future__ import annotations

import json
import os
import urllib.request
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import pandas as pd

from .. import paths
from ..checks import check_choice
from ..errors import DataError

__all__ = [
    "QUESTION_TYPES",
    "AMBIGUITIES",
    "PAPER_SAMPLES",
    "RULES",
    "HF_REPO_ID",
    "QuestionTemplate",
    "SurveyTemplates",
    "MoralChoiceDataError",
    "survey_source",
    "load_scenarios",
    "load_templates",
    "degenerate_scenarios",
]

#: The three question forms of the paper (Appendix B, Table 12), in file names.
QUESTION_TYPES = ("ab", "repeat", "compare")
#: Scenario tables: the two of the paper plus the 20-scenario controversial subset.
AMBIGUITIES = ("low", "high", "controversial")
#: Answers sampled per question form in the paper (Section 3.3): M = 5 (low), M = 10 (high ambiguity).
PAPER_SAMPLES = {"low": 5, "high": 10}
#: Gert's ten rules: (column suffix of ``a1_*``/``a2_*``, generation_rule text).
RULES = (
    ("death", "Do not kill"),
    ("pain", "Do not cause pain"),
    ("disable", "Do not disable"),
    ("freedom", "Do not deprive of freedom"),
    ("pleasure", "Do not deprive of pleasure"),
    ("deceive", "Do not deceive"),
    ("cheat", "Do not cheat"),
    ("break_promise", "Do not break your promises"),
    ("break_law", "Do not break the law"),
    ("duty", "Do your duty"),
)

HF_REPO_ID = "ninoscherrer/moralchoice"
#: Files of the survey not on the hub dataset: pinned raw GitHub addresses.
_GITHUB_FILES = {
    "response_templates/ab.json": "ninodimontalcino/moralchoice/1ddbe703ac794c37b3698a9354e29ddb33a10ca5/data/response_templates/ab.json",
    "response_templates/compare.json": "ninodimontalcino/moralchoice/1ddbe703ac794c37b3698a9354e29ddb33a10ca5/data/response_templates/compare.json",
    "response_templates/repeat.json": "ninodimontalcino/moralchoice/1ddbe703ac794c37b3698a9354e29ddb33a10ca5/data/response_templates/repeat.json",
    "response_templates/refusals.txt": "ninodimontalcino/moralchoice/1ddbe703ac794c37b3698a9354e29ddb33a10ca5/data/response_templates/refusals.txt",
    "scenarios/moralchoice_controversial_ambiguity.csv": "jacksondean17/moralchoice/366363a81a4ed2042ebd47407b6e1b5ae8c5ab73/data/scenarios/moralchoice_controversial_ambiguity.csv",
}

SCENARIO_COLUMNS = (
    ["scenario_id", "ambiguity", "generation_type", "generation_rule", "context", "action1", "action2"]
    + [f"a1_{r}" for r, _ in RULES]
    + [f"a2_{r}" for r, _ in RULES]
)


class MoralChoiceDataError(DataError):
    """The MoralChoice survey files cannot be found or are malformed."""


_NOT_FOUND = (
    "MoralChoice survey files not found. Provide them in one of three ways:\n"
    "  1. set the environment variable MORALKIT_MORALCHOICE_DIR to a directory holding "
    "scenarios/, question_templates/ and response_templates/ (layout of the MoralChoice "
    "repository's data/ folder), or pass source=<that directory>;\n"
    "  2. place that directory at <project root>/../shared/moralchoice;\n"
    "  3. on a machine with internet access, install huggingface_hub "
    "(pip install huggingface_hub) so the files are downloaded and cached from the Hugging "
    "Face dataset 'ninoscherrer/moralchoice' (pass source='hf' to force it)."
)


# --------------------------------------------------------------------------- sources
class _Source:
    """Where survey files come from: ``path(rel)`` returns a local file."""

    label: str

    def path(self, rel: str) -> Path:  # pragma: no cover - interface
        raise NotImplementedError


class _DirSource(_Source):
    def __init__(self, root: Path):
        self.root = Path(root)
        self.label = str(self.root)

    def path(self, rel: str) -> Path:
        p = self.root / rel
        if not p.exists():
            raise MoralChoiceDataError(
                f"MoralChoice file {rel!r} is missing from {self.root}; the directory must have "
                "the layout of ../shared/moralchoice (see moralkit.moralchoice.data)."
            )
        return p

    def __eq__(self, other):
        return isinstance(other, _DirSource) and self.root.resolve() == other.root.resolve()

    def __hash__(self):
        return hash(("dir", str(self.root.resolve())))


class _HubSource(_Source):
    """Hugging Face hub dataset, plus pinned GitHub files it does not hold."""

    label = f"hf://datasets/{HF_REPO_ID}"

    def path(self, rel: str) -> Path:
        if rel in _GITHUB_FILES:
            return _github_cached(rel)
        try:
            from huggingface_hub import hf_hub_download
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MoralChoiceDataError(_NOT_FOUND) from exc
        try:
            return Path(hf_hub_download(repo_id=HF_REPO_ID, filename=rel, repo_type="dataset"))
        except Exception as exc:  # network errors, offline mode, missing file
            raise MoralChoiceDataError(
                f"Could not download {rel!r} from the Hugging Face dataset {HF_REPO_ID} "
                f"({type(exc).__name__}: {exc}).\n" + _NOT_FOUND
            ) from exc

    def __eq__(self, other):
        return isinstance(other, _HubSource)

    def __hash__(self):
        return hash("hf")


def _github_cached(rel: str) -> Path:
    cache = Path(os.environ.get("MORALKIT_CACHE_DIR") or Path.home() / ".cache" / "moralkit")
    target = cache / "moralchoice" / rel
    if target.exists():
        return target
    url = "https://raw.githubusercontent.com/" + _GITHUB_FILES[rel]
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:  # noqa: S310 (pinned https URL)
            content = resp.read()
    except Exception as exc:
        raise MoralChoiceDataError(
            f"Could not download {rel!r} from {url} ({type(exc).__name__}: {exc}).\n" + _NOT_FOUND
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".part")
    tmp.write_bytes(content)
    tmp.replace(target)
    return target


def _hub_available() -> bool:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return False
    return True


def survey_source(source=None) -> _Source:
    """Resolve where the survey files come from.

    Parameters
    ----------
    source : str, path-like or None
        A directory, ``"hf"`` (the Hugging Face hub), or ``None`` for the default
        order: ``MORALKIT_MORALCHOICE_DIR``, ``../shared/moralchoice``, the hub.

    Returns
    -------
    source : object with ``label`` and ``path(relative_name)``

    Raises
    ------
    MoralChoiceDataError
        If a given directory does not exist, or if ``source=None`` and no
        directory is available and ``huggingface_hub`` is not installed. (When
        the hub is chosen but unreachable, the error is raised by the first file
        access, with the same three-ways message.)
    """
    if isinstance(source, _Source):
        return source
    if isinstance(source, str) and source.lower() in {"hf", "hub", "huggingface"}:
        return _HubSource()
    if source is not None:
        root = Path(source)
        if not root.is_dir():
            raise MoralChoiceDataError(f"MoralChoice directory {root} does not exist.\n" + _NOT_FOUND)
        return _DirSource(root)
    local = paths.moralchoice_dir()
    if local is not None:
        if not Path(local).is_dir():
            raise MoralChoiceDataError(
                f"MORALKIT_MORALCHOICE_DIR points to {local}, which is not a directory.\n" + _NOT_FOUND
            )
        return _DirSource(Path(local))
    if _hub_available():
        return _HubSource()
    raise MoralChoiceDataError(_NOT_FOUND)


# --------------------------------------------------------------------------- scenarios
def _validate_scenarios(df: pd.DataFrame, where: str) -> pd.DataFrame:
    missing = [c for c in SCENARIO_COLUMNS if c not in df.columns]
    if missing:
        raise MoralChoiceDataError(f"Scenario table {where} lacks columns {missing}.")
    if df["scenario_id"].duplicated().any():
        dup = df.loc[df["scenario_id"].duplicated(), "scenario_id"].tolist()[:5]
        raise MoralChoiceDataError(f"Scenario table {where} has duplicated scenario_id values {dup}.")
    empty = df[(df["context"] == "") | (df["action1"] == "") | (df["action2"] == "")]
    if len(empty):
        raise MoralChoiceDataError(
            f"Scenario table {where} has empty context/action fields in {empty['scenario_id'].tolist()[:5]}."
        )
    return df


def degenerate_scenarios(scenarios: pd.DataFrame) -> list[str]:
    """Scenario ids whose two actions are the same text (after stripping).

    Such a scenario (``G_530`` in the high-ambiguity table) offers no choice:
    both orderings ask the same question, so it carries no information on
    preferences and must be excluded from the analysis.
    """
    a1 = scenarios["action1"].astype(str).str.strip().str.casefold()
    a2 = scenarios["action2"].astype(str).str.strip().str.casefold()
    return scenarios.loc[a1 == a2, "scenario_id"].tolist()


@lru_cache(maxsize=16)
def _read_scenarios(src: _Source, ambiguity: str) -> pd.DataFrame:
    rel = f"scenarios/moralchoice_{ambiguity}_ambiguity.csv"
    p = src.path(rel)
    df = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8")
    return _validate_scenarios(df, f"{src.label}/{rel}")


def load_scenarios(ambiguity: str = "high", source=None, exclude_degenerate: bool = True) -> pd.DataFrame:
    """Load a MoralChoice scenario table.

    Parameters
    ----------
    ambiguity : {"low", "high", "controversial"}
        ``low``: 687 scenarios (action1 is the commonsense action);
        ``high``: 680 scenarios; ``controversial``: a 20-scenario subset of
        ``high`` (from the jacksondean17/moralchoice fork).
    source : str, path-like or None
        See :func:`survey_source`.
    exclude_degenerate : bool, default True
        Drop scenarios whose two actions are identical (:func:`degenerate_scenarios`),
        with a :class:`UserWarning` naming them.

    Returns
    -------
    DataFrame
        One row per scenario, all columns as text: ``scenario_id``, ``ambiguity``,
        ``generation_type``, ``generation_rule``, ``context``, ``action1``,
        ``action2``, ``a1_death`` ... ``a1_duty``, ``a2_death`` ... ``a2_duty``
        (``Yes``/``No``/``No Agreement``).

    References
    ----------
    Scherrer et al. (2023), Section 3.2 and Appendix A.
    """
    check_choice(ambiguity, AMBIGUITIES, "ambiguity")
    df = _read_scenarios(survey_source(source), ambiguity).copy()
    if exclude_degenerate:
        bad = degenerate_scenarios(df)
        if bad:
            warnings.warn(
                f"Excluding {len(bad)} degenerate MoralChoice scenario(s) whose two actions are "
                f"identical: {bad} (pass exclude_degenerate=False to keep them).",
                UserWarning,
                stacklevel=2,
            )
            df = df[~df["scenario_id"].isin(bad)].reset_index(drop=True)
    return df


# --------------------------------------------------------------------------- templates
@dataclass(frozen=True)
class QuestionTemplate:
    """One question form (Appendix B, Tables 12-13).

    ``question`` is a :meth:`str.format` string with three ``{}``: context,
    first option, second option; ``question_header`` is the system instruction.
    """

    name: str
    question_header: str
    question: str


@dataclass(frozen=True, eq=False)
class SurveyTemplates:
    """Question templates, response templates and refusal phrases.

    Attributes
    ----------
    questions : mapping question_type -> QuestionTemplate
    responses : mapping question_type -> {"A": tuple[str], "B": tuple[str]}
        Answer spellings meaning the first (``A``) / second (``B``) option shown,
        with placeholders ``{optionA}``, ``{optionA_short}``, ``{optionB}``,
        ``{optionB_short}``.
    refusals : tuple[str]
        Refusal phrases (one per line of ``refusals.txt``).
    source : str
        Where the files were read from.

    Instances hash by identity (the mapping caches per instance).
    """

    questions: Mapping[str, QuestionTemplate]
    responses: Mapping[str, Mapping[str, tuple]]
    refusals: tuple
    source: str = field(default="")

    def __getitem__(self, question_type: str) -> QuestionTemplate:
        return self.questions[question_type]


def _read_json(p: Path, where: str) -> dict:
    try:
        return json.loads(Path(p).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MoralChoiceDataError(f"{where} is not valid JSON: {exc}") from exc


@lru_cache(maxsize=8)
def _read_templates(src: _Source) -> SurveyTemplates:
    questions, responses = {}, {}
    for qt in QUESTION_TYPES:
        rel = f"question_templates/{qt}.json"
        d = _read_json(src.path(rel), f"{src.label}/{rel}")
        for key in ("name", "question_header", "question"):
            if not isinstance(d.get(key), str):
                raise MoralChoiceDataError(f"{src.label}/{rel} lacks the text field {key!r}.")
        if d["question"].count("{}") != 3:
            raise MoralChoiceDataError(
                f"{src.label}/{rel}: 'question' must have three {{}} (context, first, second option)."
            )
        questions[qt] = QuestionTemplate(d["name"], d["question_header"], d["question"])
        rel = f"response_templates/{qt}.json"
        d = _read_json(src.path(rel), f"{src.label}/{rel}")
        for key in ("responses_A", "responses_B"):
            if not isinstance(d.get(key), list):
                raise MoralChoiceDataError(f"{src.label}/{rel} lacks the list {key!r}.")
        responses[qt] = MappingProxyType({"A": tuple(d["responses_A"]), "B": tuple(d["responses_B"])})
    text = src.path("response_templates/refusals.txt").read_text(encoding="utf-8")
    refusals = tuple(line for line in text.splitlines() if line.strip())
    return SurveyTemplates(MappingProxyType(questions), MappingProxyType(responses), refusals, src.label)


def load_templates(source=None) -> SurveyTemplates:
    """Load the question templates, response templates and refusal phrases.

    Parameters
    ----------
    source : str, path-like or None
        See :func:`survey_source`.

    Returns
    -------
    SurveyTemplates
        ``templates.questions["ab"].question_header`` etc.; ``templates.responses``
        and ``templates.refusals`` drive :func:`moralkit.moralchoice.map_answer`.
        The same object is returned for the same source (cached).

    References
    ----------
    Scherrer et al. (2023), Appendix B.1 (Tables 12-13) and B.2.
    """
    return _read_templates(survey_source(source))
