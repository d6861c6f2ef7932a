"""One survey, one model, one run directory: the live collection of notebook 01 (``collect = True``).

The command line's ``collect psm|moralchoice`` builds its collection from options (:mod:`moralkit.cli`);
this module builds the same collection from a notebook's parameters. Both call the same collectors
(:func:`moralkit.collect.psm.run_psm`, :func:`moralkit.collect.moralchoice.run_moralchoice`), name the
run directory alike (``psm-<model>-t1-s<seed>``, ``mc-<ambiguity>-<model>-t1-s<seed>``) and resume it
when it exists.

- :func:`collection_estimate`: the requests, tokens and cost of the collection in each mode, before it runs
  (:mod:`moralkit.collect.cost`).
- :func:`collect_survey`: run it, with the cost meter of ``max_cost``; a collection that stops with tasks
  undone (a budget, a refusal, retries spent) is kept and resumable, and said so in the result.

References
----------
Seror (2025), §2.1 (the PSM: round 0, 160 constrained rounds, three attempts per round); Scherrer et al.
(2023), §3.3 (MoralChoice: six question forms, M samples at temperature 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from moralkit.errors import MoralkitError

from . import cost

__all__ = ["SurveyRun", "collection_estimate", "quick_limit", "run_dir_name", "collect_survey"]

SURVEYS = ("psm", "moralchoice")


def _check_survey(survey: str) -> None:
    if survey not in SURVEYS:
        raise MoralkitError(f"survey must be 'psm' or 'moralchoice', got {survey!r}")


def _survey_kwargs(survey: str, limit, ambiguity, n_scenarios, samples) -> dict:
    """The survey-specific arguments shared by the estimate and the collector."""
    if survey == "psm":
        return {"limit": limit}
    return {"ambiguity": ambiguity, "n_scenarios": n_scenarios, "samples": samples}


def collection_estimate(survey: str, model: str, backend: str = "transformers", *, limit=None,
                        quick: bool = False, ambiguity: str = "low", n_scenarios=None, samples=None, price_in=None,
                        price_out=None) -> pd.DataFrame:
    """Requests, input and output tokens and cost of the whole collection, one row per mode.

    Parameters
    ----------
    survey : {"psm", "moralchoice"}
        What to collect.
    model, backend
        As for :func:`collect_survey`; a local (``"transformers"``) model's own tokenizer counts the tokens
        when it loads, else the committed runs' calibration.
    limit : int, optional
        PSM: the constrained rounds (None: all 160). Not used for MoralChoice's estimate (its ``limit`` is per
        session, the estimate covers the whole collection).
    quick : bool
        With ``limit=None``: a small run, as :func:`collect_survey`'s ``quick``.
    ambiguity, n_scenarios, samples
        MoralChoice: the scenarios and M (None: the paper's, 5 low, 10 high).
    price_in, price_out : float, optional
        Dollars per million input and output tokens (default: the genai-prices table's; NaN cost without).

    Returns
    -------
    pandas.DataFrame
        :func:`moralkit.collect.cost.estimate_table` of the collection.
    """
    _check_survey(survey)
    limit = quick_limit(limit, quick)
    parts = cost.survey_parts(survey, cost.counter_for(model, backend),
                              **_survey_kwargs(survey, limit, ambiguity, n_scenarios, samples))
    return cost.estimate_table(parts, cost.price_for(model, price_in=price_in, price_out=price_out), model=model)


def quick_limit(limit, quick: bool):
    """``limit``, or 2 (rounds or scenarios) in quick mode when no limit is given.

    Examples
    --------
    >>> quick_limit(None, True), quick_limit(None, False), quick_limit(5, True)
    (2, None, 5)
    """
    return (2 if quick else None) if limit is None else limit


def run_dir_name(survey: str, model: str, seed: int = 0, ambiguity: str = "low") -> str:
    """The run directory's name, as the README's commands name it (temperature 1, sampling seed ``seed``).

    Examples
    --------
    >>> run_dir_name("psm", "qwen2.5-coder-0.5b-instruct"), run_dir_name("moralchoice", "m", 1, "high")
    ('psm-qwen2.5-coder-0.5b-instruct-t1-s0', 'mc-high-m-t1-s1')
    """
    _check_survey(survey)
    return f"psm-{model}-t1-s{seed}" if survey == "psm" else f"mc-{ambiguity}-{model}-t1-s{seed}"


@dataclass(frozen=True)
class SurveyRun:
    """What :func:`collect_survey` did.

    Attributes
    ----------
    run_dir : Path
        The run directory (records.jsonl, manifest.json); re-running resumes it.
    quality : dict or None
        ``psm_quality`` / ``moralchoice_quality`` of the run directory; None when the session stopped with
        tasks undone.
    line : str
        The completeness line of the session (:meth:`moralkit.collect.runner.RunReport.line`), or the message
        of the stop (what is undone and how to resume) when it stopped with tasks undone.
    complete : bool
        Whether the session ended with every task of this session done.
    """

    run_dir: Path
    quality: dict | None
    line: str
    complete: bool

    def summary(self, shown_dir: str | None = None) -> str:
        """The lines notebook 01 prints: the run directory and its quality, then the completeness line."""
        if not self.complete:
            return self.line
        return f"{shown_dir or self.run_dir} {self.quality}\n{self.line}"


def _backend(backend: str, model: str, base_url, api_key_env, max_cost, price_in, price_out):
    """The backend with its cost meter (a price for API models, or for a local one given a price)."""
    from . import make_backend

    kw = {}
    if backend == "openai":
        kw = {k: v for k, v in (("base_url", base_url), ("api_key_env", api_key_env)) if v is not None}
    elif base_url is not None:
        raise MoralkitError(f"base_url applies to backend='openai' only, got backend={backend!r}")
    b = make_backend(backend, model, **kw)
    price = (cost.price_for(model, price_in=price_in, price_out=price_out)
             if backend != "transformers" or price_in is not None else None)
    b.cost_meter = cost.CostMeter(price=price, max_cost=max_cost)
    return b


def collect_survey(survey: str, model: str, backend: str = "transformers", *, seed: int = 0, limit=None,
                   quick: bool = False, ambiguity: str = "low", n_scenarios=None, samples=None, base_url=None, api_key_env=None,
                   max_cost=None, price_in=None, price_out=None, out=None, data=None,
                   progress: bool = True) -> SurveyRun:
    """Administer ``survey`` to ``model`` into a run directory (in a shuffled order), resuming it if it exists.

    Parameters
    ----------
    survey : {"psm", "moralchoice"}
        The PSM (round 0 and ``limit`` constrained rounds) or MoralChoice (the six forms x M samples).
    model : str
        Registry name, .gguf file, directory or hub id of a local model, or the API model name.
    backend : {"transformers", "openai", "anthropic"}
        As for :func:`moralkit.collect.make_backend`.
    seed : int
        Sampling seed (each request's seed derives from it).
    limit : int, optional
        PSM: constrained rounds; MoralChoice: scenarios completed in this session (None: all).
    quick : bool
        With ``limit=None``: a small run, 2 constrained rounds (PSM) or 2 scenarios (MoralChoice).
    ambiguity, n_scenarios, samples
        MoralChoice: the scenarios and M.
    base_url, api_key_env : str, optional
        ``backend="openai"``: an OpenAI-compatible endpoint and the NAME of the environment variable holding the
        key (default OPENAI_API_KEY; the key is never written).
    max_cost : float, optional
        Dollars the run may cost in all: it stops cleanly, resumable, before a request that could cross it.
    price_in, price_out : float, optional
        Dollars per million input and output tokens (default: the genai-prices table's).
    out : path, optional
        The run directory (default: ``<data>/raw/`` + :func:`run_dir_name` with the backend's model name).
    data : path, optional
        The data folder (default: :func:`moralkit.paths.data_dir`).
    progress : bool
        Show a progress bar.

    Returns
    -------
    SurveyRun
        The run directory, its quality, the completeness line, and whether the session completed.
    """
    from moralkit.runs import run_dir as project_run_dir

    from .moralchoice import MC_LINE, moralchoice_quality, run_moralchoice
    from .psm import psm_quality, run_psm
    from .runner import CollectionIncompleteError

    _check_survey(survey)
    limit = quick_limit(limit, quick)
    b = _backend(backend, model, base_url, api_key_env, max_cost, price_in, price_out)
    run_dir = Path(out) if out else project_run_dir("raw", data) / run_dir_name(survey, b.model, seed, ambiguity)
    kw = _survey_kwargs(survey, limit, ambiguity, n_scenarios, samples)
    try:
        if survey == "psm":
            _, rep = run_psm(b, run_dir, seed=seed, order="shuffled", progress=progress, return_report=True, **kw)
            return SurveyRun(run_dir, psm_quality(run_dir), rep.line("rounds (incl. round 0)"), True)
        _, rep = run_moralchoice(b, run_dir, seed=seed, limit=limit, order="shuffled", progress=progress,
                                 return_report=True, **kw)
        return SurveyRun(run_dir, moralchoice_quality(run_dir), rep.line(*MC_LINE), True)
    except CollectionIncompleteError as e:  # saved and resumable: say so
        return SurveyRun(run_dir, None, str(e), False)
