"""Every respondent of the committed data, labelled for what it is: one registry for pages, index and README.

A *respondent* is one label in a data file (the PSM file's ``model``, the MoralChoice file's
``model_id``, a likelihood file's ``model``). Labels are not all different models:

==========================  ===========================================================================
kind                        what it is
==========================  ===========================================================================
``real model``              an LLM's own answers, sampled at temperature 1 (or its token probabilities)
``second sampling seed``    the same model and the same design, answered again with another sampling
                            seed (label ``<model>-s<k>``). In the PSM the constrained rounds depend on
                            the unconstrained answer q0 (the corner flip, §2.2), so the option sets
                            need not be the same as the first run's
``persona-prompted``        the same model under a short system prompt naming a moral theory
                            (label ``<model>+persona-<name>``, :mod:`moralkit.collect.personas`)
``simulated``               numbers drawn by :mod:`moralkit.psm.simulate` (label ``sim-…``), never LLM output
==========================  ===========================================================================

:data:`REGISTRY` lists the respondents of the committed data (``data/``) and of the shared MoralChoice
responses, with a short label for table headers. A test reads the data directories and fails when a
label is missing here. Labels not in the registry (a user's own collection) are described from their
form by :func:`describe` with ``strict=False``.

References
----------
Seror (2025), §2.2 (rounds, the corner flip); Scherrer et al. (2023), §3.3 (sampling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import MoralkitError

__all__ = ["Respondent", "REGISTRY", "KINDS", "EXACT_SUFFIX", "describe", "short_label", "shorten", "shorten_labels", "kind",
           "legend", "respondents_markdown", "data_labels", "differing_rounds", "S1_DIFFERING_ROUNDS",
           "DATA_COLUMNS", "data_legend", "seed_difference_lines"]

KINDS = ("real model", "second sampling seed", "persona-prompted", "simulated")
#: Suffix of a respondent whose MoralChoice likelihoods are computed from token probabilities.
EXACT_SUFFIX = " (exact)"

#: Rounds (of 160) in which the PSM option sets of ``qwen2.5-coder-0.5b-instruct-s1`` differ from those
#: of ``qwen2.5-coder-0.5b-instruct`` (recomputed from data/psm by a test).
S1_DIFFERING_ROUNDS = 68


@dataclass(frozen=True)
class Respondent:
    """One respondent.

    Attributes
    ----------
    label : str
        As written in the data files.
    short : str
        A short name for table headers and legends.
    kind : str
        One of :data:`KINDS`.
    model : str
        The underlying model (Hugging Face id or provider path).
    what : str
        One sentence: what the answers are.
    data : str
        Where its answers are (committed ``data/`` folders, or the shared MoralChoice responses).
    """

    label: str
    short: str
    kind: str
    model: str
    what: str
    data: str


_Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
_LOCAL = "run locally (transformers, CPU), temperature 1"
_ALL_OWN = "data/psm, data/moralchoice, data/moralchoice_likelihood"
_SHARED = ("shared MoralChoice responses (jacksondean17/moralchoice fork, collected 2025-02): high ambiguity, "
           "A/B form only, one answer per ordering")


def _persona(name: str, short: str) -> Respondent:
    return Respondent(
        f"qwen2.5-coder-0.5b-instruct+persona-{name}", f"Q0.5B+{short}", "persona-prompted", _Q05,
        f"Qwen2.5-Coder-0.5B-Instruct under the '{name}' persona system prompt (moralkit.collect.personas); "
        "the same model as Q0.5B, not another model", "data/psm, data/moralchoice_likelihood")


#: Every respondent of the committed data and the shared MoralChoice responses.
REGISTRY: dict[str, Respondent] = {r.label: r for r in (
    Respondent("qwen2.5-coder-0.5b-instruct", "Q0.5B", "real model", _Q05,
               f"Qwen2.5-Coder-0.5B-Instruct (494M parameters), {_LOCAL}, sampling seed 0", _ALL_OWN),
    Respondent("qwen2.5-coder-0.5b-instruct-s1", "Q0.5B-s1", "second sampling seed", _Q05,
               "Q0.5B again with sampling seed 1 (same design seed). Its option sets differ from Q0.5B's in "
               f"{S1_DIFFERING_ROUNDS} of 160 rounds, because each round's corner depends on the unconstrained "
               "answer q0; a measure of sampling noise, not an identical re-run", "data/psm"),
    Respondent("qwen2.5-coder-1.5b-instruct", "Q1.5B", "real model", "Qwen/Qwen2.5-Coder-1.5B-Instruct",
               f"Qwen2.5-Coder-1.5B-Instruct (1.5B parameters), {_LOCAL}", _ALL_OWN),
    Respondent("smollm2-135m-instruct", "SmolLM2", "real model", "HuggingFaceTB/SmolLM2-135M-Instruct",
               f"SmolLM2-135M-Instruct (135M parameters), {_LOCAL}; most of its MoralChoice answers are invalid",
               _ALL_OWN),
    _persona("care", "care"),
    _persona("deontological", "deon"),
    _persona("utilitarian", "util"),
    Respondent("langchain/anthropic/claude-3-5-haiku", "haiku-3.5", "real model", "anthropic/claude-3-5-haiku",
               "Anthropic's Claude 3.5 Haiku through its API", _SHARED),
    Respondent("langchain/openai/gpt-4o-mini", "4o-mini", "real model", "openai/gpt-4o-mini",
               "OpenAI's GPT-4o mini through its API", _SHARED),
    Respondent("langchain/google/gemini-1.5-flash-8b", "gem-8b", "real model", "google/gemini-1.5-flash-8b",
               "Google's Gemini 1.5 Flash-8B through its API", _SHARED),
    Respondent("together/deepseek-ai/DeepSeek-V3", "DS-V3", "real model", "deepseek-ai/DeepSeek-V3",
               "DeepSeek-V3 through the Together API", _SHARED),
    Respondent("together/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo-128K", "L3.1-8B", "real model",
               "meta-llama/Meta-Llama-3.1-8B-Instruct",
               "Meta's Llama 3.1 8B Instruct (Turbo, 128K) through the Together API", _SHARED),
    Respondent("langchain/together/llama3.3-70b", "L3.3-70B", "real model", "meta-llama/Llama-3.3-70B-Instruct",
               "Meta's Llama 3.3 70B through the Together API (controversial subset only)",
               "shared MoralChoice responses, controversial subset (20 scenarios)"),
)}

_SEED = re.compile(r"^(?P<base>.+)-s(?P<seed>\d+)$")
_PERSONA = re.compile(r"^(?P<base>.+)\+persona-(?P<name>[A-Za-z0-9_-]+)$")


def _strip(label: str) -> tuple[str, bool]:
    label = str(label)
    if label.endswith(EXACT_SUFFIX):
        return label[: -len(EXACT_SUFFIX)], True
    return label, False


def describe(label: str, *, strict: bool = False) -> Respondent:
    """The registry entry of ``label`` (a trailing ``" (exact)"`` is ignored).

    Parameters
    ----------
    label : str
    strict : bool, default False
        Raise for a label not in :data:`REGISTRY`. Otherwise such a label is described from its form:
        ``sim-…`` simulated, ``…+persona-<name>`` persona-prompted, ``…-s<k>`` second sampling seed,
        anything else a real model.

    Examples
    --------
    >>> describe("qwen2.5-coder-0.5b-instruct-s1").kind
    'second sampling seed'
    >>> describe("sim-quadratic").kind
    'simulated'
    >>> describe("my-model+persona-virtue").kind
    'persona-prompted'
    """
    base, _ = _strip(label)
    if base in REGISTRY:
        return REGISTRY[base]
    if strict:
        raise MoralkitError(f"respondent {label!r} is not in moralkit.respondents.REGISTRY; add an entry saying "
                            "what it is (real model, second sampling seed, persona-prompted or simulated).")
    if base.startswith("sim-"):
        return Respondent(base, base, "simulated", "", "simulated answers (moralkit.psm.simulate), not LLM output",
                          "")
    m = _PERSONA.match(base)
    if m:
        return Respondent(base, base, "persona-prompted", m["base"],
                          f"{m['base']} under the '{m['name']}' persona system prompt", "")
    m = _SEED.match(base)
    if m:
        return Respondent(base, base, "second sampling seed", m["base"],
                          f"{m['base']} with sampling seed {m['seed']}", "")
    return Respondent(base, base, "real model", base, "a model's answers (not in the registry)", "")


def kind(label: str) -> str:
    """The kind of respondent (one of :data:`KINDS`).

    Examples
    --------
    >>> kind("qwen2.5-coder-0.5b-instruct+persona-care (exact)")
    'persona-prompted'
    """
    return describe(label).kind


def short_label(label: str) -> str:
    """A short name for headers: the registry's ``short`` (``" ex"`` appended for exact likelihoods).

    Examples
    --------
    >>> short_label("qwen2.5-coder-1.5b-instruct"), short_label("smollm2-135m-instruct (exact)")
    ('Q1.5B', 'SmolLM2 ex')
    """
    base, exact = _strip(label)
    return describe(base).short + (" ex" if exact else "")


def shorten_labels(value):
    """``value`` with every registry label in it replaced by its short label (longest label first); values
    that are not strings are returned unchanged. For cells that name respondents inside text, e.g. a pair
    ``"a - b"`` or a component ``"{a, b}"``, so that a table on the page fits its column (show the legend).

    Examples
    --------
    >>> shorten_labels("qwen2.5-coder-0.5b-instruct-s1 - qwen2.5-coder-0.5b-instruct")
    'Q0.5B-s1 - Q0.5B'
    >>> shorten_labels("{gpt-4, smollm2-135m-instruct}"), shorten_labels(0.25)
    ('{gpt-4, SmolLM2}', 0.25)
    """
    if not isinstance(value, str):
        return value
    return _LABELS.sub(lambda m: REGISTRY[m.group(0)].short, value)


def shorten(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` for the page: every registry label in its cells, index and column names replaced by its
    short label (:func:`shorten_labels`). Use it as ``figures.show(table, stem, view=shorten)``, so that the
    CSV keeps the full ids, and show :func:`legend` nearby.

    Examples
    --------
    >>> shorten(pd.DataFrame({"model": ["qwen2.5-coder-1.5b-instruct"], "x": [1]}))
       model  x
    0  Q1.5B  1
    """
    def text(values) -> bool:
        return values.dtype == object or pd.api.types.is_string_dtype(values.dtype)

    out = df.copy()
    for c in out.columns:
        if text(out[c]):
            out[c] = out[c].map(shorten_labels)
    if isinstance(out.index, pd.MultiIndex):
        out.index = out.index.set_levels([lv.map(shorten_labels) if text(lv) else lv
                                          for lv in out.index.levels])
    elif text(out.index):
        out.index = out.index.map(shorten_labels)
    return out.rename(columns=shorten_labels)


def legend(labels, *, what: bool = False, exact_note: bool = True) -> pd.DataFrame:
    """The legend of a table whose headers are short labels: ``short``, ``respondent`` (full id), ``kind``.

    Parameters
    ----------
    labels : iterable of str
        Full labels, in the order wanted (duplicates dropped).
    what : bool, default False
        Add the column ``what`` (one sentence on each respondent).
    exact_note : bool, default True
        In ``what``, say for labels ending in ``" (exact)"`` that the likelihoods come from token probabilities.
    """
    rows, seen = [], set()
    for lab in labels:
        if lab in seen:
            continue
        seen.add(lab)
        r = describe(lab)
        text = r.what
        if exact_note and _strip(lab)[1]:
            text = "exact likelihoods from token probabilities of: " + text
        rows.append(dict(short=short_label(lab), respondent=lab, kind=r.kind, what=text))
    return pd.DataFrame(rows, columns=["short", "respondent", "kind", "what"][: 4 if what else 3])


def respondents_markdown(labels=None, *, what: bool = True) -> str:
    """A Markdown table of respondents (default: the whole registry) with their kind and (``what``) what they are."""
    labels = list(REGISTRY) if labels is None else list(labels)
    lines = ["| short | respondent | kind |" + (" what it is |" if what else ""),
             "| --- | --- | --- |" + (" --- |" if what else "")]
    for lab in labels:
        r = describe(lab)
        lines.append(f"| {short_label(lab)} | `{lab}` | {r.kind} |" + (f" {r.what} |" if what else ""))
    return "\n".join(lines)


def data_labels(data_dir=None, shared_dir=None) -> dict[str, set]:
    """Every respondent label in the data: ``{"psm": …, "moralchoice": …, "moralchoice_likelihood": …, "shared": …}``.

    Reads the label column of each file (PSM ``model``, MoralChoice ``model_id``, likelihood ``model``).
    ``shared`` is empty when the shared MoralChoice directory is absent.
    """
    from .paths import data_dir as _data_dir

    root = Path(data_dir) if data_dir is not None else _data_dir()
    cols = {"psm": "model", "moralchoice": "model_id", "moralchoice_likelihood": "model"}
    out = {}
    for sub, col in cols.items():
        labels = set()
        for f in sorted((root / sub).glob("*.csv*")) if (root / sub).is_dir() else []:
            labels |= set(pd.read_csv(f, usecols=[col], dtype=str, keep_default_na=False)[col])
        out[sub] = labels
    shared = set()
    if shared_dir is not None and Path(shared_dir).is_dir():
        for f in sorted(Path(shared_dir).glob("responses/*/*.csv*")):
            shared |= set(pd.read_csv(f, usecols=["model_id"], dtype=str, keep_default_na=False)["model_id"])
    out["shared"] = shared
    return out


def differing_rounds(a, b) -> int:
    """Rounds (by round index) whose option sets differ between two PSM datasets of the same design.

    Two runs of one design share the 160 rounds, but each round's corner depends on the run's own
    unconstrained answer q0 (Seror 2025, §2.2), so a second sampling seed need not see the same options.

    Examples
    --------
    >>> from moralkit.psm.design import make_design
    >>> from moralkit.psm.simulate import simulate_random
    >>> d = make_design(0)
    >>> differing_rounds(simulate_random(d, seed=1), simulate_random(d, seed=1))
    0
    """
    import numpy as np

    ia = {int(r): i for i, r in enumerate(a.round_index)}
    ib = {int(r): i for i, r in enumerate(b.round_index)}
    return sum(not np.array_equal(a.options[ia[r]], b.options[ib[r]]) for r in sorted(set(ia) & set(ib)))


#: The column of :func:`data_legend` for each place of :func:`data_labels`.
DATA_COLUMNS = {"psm": "PSM", "moralchoice": "MC sampled", "moralchoice_likelihood": "MC exact", "shared": "MC shared"}


def data_legend(present: dict) -> pd.DataFrame:
    """The legend of every respondent of the data (registry order, others last), with a ✓ column per place
    its answers are in.

    Parameters
    ----------
    present : dict {place: set of labels}
        :func:`data_labels`; its places head the columns through :data:`DATA_COLUMNS`.
    """
    order = list(REGISTRY)
    who = legend(labels=sorted(set().union(*present.values()),
                               key=lambda m: order.index(m) if m in REGISTRY else len(order)))
    for place, labels in present.items():
        who[DATA_COLUMNS[place]] = who["respondent"].isin(labels).map({True: "✓", False: ""})
    return who


def seed_difference_lines(psm: dict, base: str) -> list[str]:
    """One line per other run of ``base`` in ``psm`` (another sampling seed, a persona): in how many rounds its
    option sets differ from ``base``'s (:func:`differing_rounds`); none when ``psm`` has no such run."""
    others = sorted(m for m in psm if m != base and m.startswith(base))
    return [f"{short_label(other)}: option sets differ from {short_label(base)}'s in "
            f"{differing_rounds(psm[base], psm[other])} of {psm[base].n_rounds} rounds" for other in others]


#: every registry label, longest first, so that a label that extends another wins
_LABELS = re.compile("|".join(re.escape(x) for x in sorted(REGISTRY, key=len, reverse=True)))
