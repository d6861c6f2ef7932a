"""Action likelihoods from an OpenAI-compatible endpoint's ``top_logprobs`` (client side).

For each ``ab`` and ``compare`` form of a scenario, one request asks for **one** output token with
``logprobs: true`` and ``top_logprobs: 20`` (OpenAI's maximum) at temperature 1; the first token's
alternatives go to :func:`moralkit.moralchoice.logprobs.first_token_likelihood`. The request is the one
the sampling collector sends for the same form (the template's instruction header as system message,
the question as user message), so the three estimators see the same prompt.

The per-request part is three small pure functions, so that any request loop (the shared runner,
a batch file) can use them: :func:`logprob_request` (form -> request body),
:func:`parse_top_logprobs` (response JSON -> the first token's alternatives) and
:func:`form_likelihood` (both -> the form's row). :class:`LogprobScorer` drives them through the official
``openai`` SDK for a few scenarios.

As a collection (``python -m moralkit likelihood --estimator top_logprobs``,
:func:`moralkit.collect.likelihood_run.run_likelihood` with ``estimator="top_logprobs"``),
:func:`collect_top_logprobs` sends the same requests through the shared request runner
(:func:`moralkit.collect.runner.run_tasks`): one record per response as it arrives, failed requests
recorded and re-sent with backoff, a run stopped at any point resumed by re-running the command, and the
tidy table (:func:`top_logprob_rows`) in the layout of the exact estimator's, with the estimator in its
``estimator`` column.

The ``repeat`` form cannot be scored this way (:data:`REPEAT_FALLBACK`): the collection samples it instead,
``M`` answers per ordering at temperature 1 (the paper's M by default), mapped with
:func:`moralkit.moralchoice.map_answer`; its rows carry ``estimator = "sampling"`` (eq. 7: the share of the
valid answers that choose each action, 0.5 each when none is valid).

Which providers return ``top_logprobs`` (2026-11, see the providers' API references and the
README): OpenAI chat completions on non-reasoning models (GPT-4o, GPT-4.1 families; reasoning models
refuse), vLLM, Together, Ollama >= 0.12.11, ``python -m moralkit serve``; Gemini on some models through
its own parameters; Anthropic's Messages API returns none.

References
----------
Scherrer et al. (2023), Definition 1, Section 2.3 (eq. 7), Section 3.3 (temperature 1, system
instruction of Table 13). OpenAI API reference, "Create chat completion", ``logprobs`` /
``top_logprobs`` and ``choices[i].logprobs.content[j].top_logprobs``
(https://platform.openai.com/docs/api-reference/chat/create).
"""

from __future__ import annotations

import os
import time

from ..checks import check_int
from ..errors import DataError, MoralkitError

__all__ = ["LOGPROB_FORMS", "FORM_ESTIMATORS", "REPEAT_FALLBACK", "logprob_request", "parse_top_logprobs",
           "form_likelihood", "LogprobScorer", "logprob_tasks", "collect_top_logprobs", "top_logprob_rows"]

#: The question forms scored from log-probabilities: (question_type, ordering).
LOGPROB_FORMS = (("ab", 0), ("ab", 1), ("compare", 0), ("compare", 1))

#: The estimator of each question type in a ``top_logprobs`` collection (the ``estimator`` column).
FORM_ESTIMATORS = {"ab": "top_logprobs", "compare": "top_logprobs", "repeat": "sampling"}

#: Why the ``repeat`` form is sampled in a ``top_logprobs`` collection (recorded in the manifest, printed).
REPEAT_FALLBACK = ("the 'repeat' form cannot be scored from the first token's top_logprobs (its answer is a whole "
                   "option sentence, and both options usually start with the same tokens): it is sampled M times "
                   "per ordering at temperature 1 instead, and its rows carry estimator 'sampling'")


def logprob_request(scenario, question_type: str, ordering: int, model: str, templates=None, persona: str = "none",
                    top_logprobs: int = 20, seed: int | None = 0) -> dict:
    """The chat-completions body that asks for one token and its ``top_logprobs`` for one question form.

    Examples
    --------
    >>> sc = {"context": "You see a wallet.", "action1": "I keep it.", "action2": "I return it."}
    >>> b = logprob_request(sc, "ab", 0, "m")
    >>> b["max_tokens"], b["logprobs"], b["top_logprobs"], [m["role"] for m in b["messages"]]
    (1, True, 20, ['system', 'user'])
    """
    from ..moralchoice import build_prompt, load_templates
    from ..moralchoice.logprobs import LOGPROB_QUESTION_TYPES
    from .exact_scoring import persona_system

    if question_type not in LOGPROB_QUESTION_TYPES:
        raise MoralkitError(f"the {question_type!r} form cannot be scored from log-probabilities (only "
                            f"{LOGPROB_QUESTION_TYPES}); sample it instead (moralkit collect moralchoice)")
    top_logprobs = check_int(top_logprobs, "top_logprobs", minimum=1, maximum=20)  # OpenAI's range
    templates = templates or load_templates()
    header, text = build_prompt(scenario, question_type, ordering, templates)
    system = persona_system(header, persona)
    body = dict(model=model, messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
                max_tokens=1, temperature=1.0, logprobs=True, top_logprobs=int(top_logprobs))
    if seed is not None:
        body["seed"] = int(seed)
    return body


def parse_top_logprobs(response) -> list[dict]:
    """The first generated token's alternatives, ``[{"token", "logprob"}, ...]``, from a response's JSON.

    Raises :class:`~moralkit.errors.DataError` naming what is missing (a server that ignores ``logprobs``
    returns ``logprobs: null``).

    Examples
    --------
    >>> r = {"choices": [{"logprobs": {"content": [{"token": "A", "logprob": -0.1,
    ...       "top_logprobs": [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.4}]}]}}]}
    >>> [e["token"] for e in parse_top_logprobs(r)]
    ['A', 'B']
    """
    if hasattr(response, "model_dump"):
        response = response.model_dump()
    try:
        choice = response["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise DataError("the response has no choices[0]") from None
    lp = choice.get("logprobs") if isinstance(choice, dict) else None
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        raise DataError("the response has no choices[0].logprobs.content: the endpoint or model does not return "
                        "log-probabilities (OpenAI reasoning models and Anthropic do not); sample this model instead")
    if not lp["content"]:
        raise DataError("choices[0].logprobs.content is empty: no token was generated")
    first = lp["content"][0]
    top = first.get("top_logprobs") if isinstance(first, dict) else None
    if not isinstance(top, list) or not top:
        raise DataError("choices[0].logprobs.content[0].top_logprobs is missing or empty: send top_logprobs >= 1")
    return [{"token": e.get("token"), "logprob": e.get("logprob")} if isinstance(e, dict) else e for e in top]


def form_likelihood(response, scenario, question_type: str, ordering: int, templates=None) -> dict:
    """One question form's likelihood row from the response to :func:`logprob_request`."""
    from ..moralchoice.logprobs import first_token_likelihood

    return first_token_likelihood(parse_top_logprobs(response), scenario, question_type, ordering, templates)


class LogprobScorer:
    """Score scenarios through an OpenAI-compatible endpoint with the official ``openai`` SDK.

    Parameters
    ----------
    model : str
        The model name the endpoint knows.
    base_url : str, optional
        E.g. ``http://127.0.0.1:8000/v1`` (``moralkit serve``); default OpenAI's.
    api_key_env : str, default "OPENAI_API_KEY"
        Name of the environment variable holding the key (a local server needs none).
    label : str, optional
        The respondent's label in the table (default ``model``).
    top_logprobs : int, default 20
    timeout, max_retries
        Passed to the SDK client (it retries 408/409/429/5xx with backoff and ``Retry-After``).
    """

    def __init__(self, model, base_url=None, api_key_env="OPENAI_API_KEY", label=None, top_logprobs=20,
                 persona="none", timeout=120.0, max_retries=4, templates=None):
        import openai

        from ..moralchoice import load_templates

        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise MoralkitError(f"set the environment variable {api_key_env} to your API key")
        self.client = openai.OpenAI(api_key=key or "sk-no-key-needed", base_url=base_url, timeout=timeout,
                                    max_retries=max_retries)
        self.model, self.label, self.top_logprobs, self.persona = model, label or model, int(top_logprobs), persona
        self.templates = templates or load_templates()
        self.requests = 0
        self.seconds = 0.0

    def score_form(self, scenario, question_type, ordering) -> dict:
        body = logprob_request(scenario, question_type, ordering, self.model, self.templates, self.persona,
                               self.top_logprobs)
        t0 = time.perf_counter()
        resp = self.client.chat.completions.create(**body)
        self.seconds += time.perf_counter() - t0
        self.requests += 1
        return form_likelihood(resp.model_dump(), scenario, question_type, ordering, self.templates)

    def score_scenario(self, scenario, forms=LOGPROB_FORMS) -> list[dict]:
        """Rows (one per form) in the columns of :func:`moralkit.moralchoice.likelihood.likelihood_table`."""
        return [dict(model=self.label, scenario_id=scenario["scenario_id"], question_type=q, ordering=o,
                     **self.score_form(scenario, q, o)) for q, o in forms]

    def close(self):
        self.client.close()


# ------------------------------------------------------------------ the collection (records, resume, table)
def logprob_tasks(scenario, question_types, templates, systems: dict, *, samples: int, top_logprobs: int = 20):
    """The requests of one scenario in a ``top_logprobs`` collection, as runner tasks.

    ``ab`` and ``compare``: one task per ordering (task id ``<scenario>|<type>|<ordering>|lp``), one output
    token with ``logprobs`` and ``top_logprobs`` at temperature 1. ``repeat``: ``samples`` tasks per ordering
    (``<scenario>|repeat|<ordering>|<sample>``), sampled at temperature 1 (:data:`REPEAT_FALLBACK`).
    ``systems`` maps a question type to its system message (the template header, after a persona's text).
    """
    from ..moralchoice import build_prompt
    from .backends import Sampling
    from .moralchoice import DEFAULT_MAX_TOKENS
    from .runner import Task

    sid = scenario["scenario_id"]
    n_forms = 2 * len(question_types)
    one_token = Sampling(temperature=1.0, top_p=1.0, max_tokens=1)
    sampled = Sampling(temperature=1.0, top_p=1.0, max_tokens=DEFAULT_MAX_TOKENS["repeat"])
    acts = (scenario["action1"], scenario["action2"])
    tasks = []
    for q in question_types:
        for o in (0, 1):
            _, text = build_prompt(scenario, q, o, templates)
            base = dict(scenario_id=sid, question_type=q, ordering=o, n_forms=n_forms, estimator=FORM_ESTIMATORS[q])
            if q == "repeat":
                tasks += [Task(f"{sid}|{q}|{o}|{m}", text, dict(base, part="sample", sample=m, n_samples=int(samples)),
                               system=systems[q], sampling=sampled, context=(*acts, o)) for m in range(int(samples))]
            else:
                tasks.append(Task(f"{sid}|{q}|{o}|lp", text, dict(base, part="top_logprobs"), system=systems[q],
                                  sampling=one_token, context=(*acts, o),
                                  extra_body={"logprobs": True, "top_logprobs": int(top_logprobs)}))
    return tasks


def _parser(templates):
    """``parse(task, completion)`` for :func:`moralkit.collect.runner.run_tasks` (``parse_completion=True``)."""
    from ..moralchoice import map_answer
    from ..moralchoice.logprobs import first_token_likelihood

    def parse(t, c):
        a1, a2, o = t.context
        q = t.fields["question_type"]
        if t.fields["part"] == "sample":
            d = map_answer(c.text, q, o, a1, a2, templates)
            return d, "ok" if d in ("action1", "action2") else d
        top = parse_top_logprobs(c.data)
        lik = first_token_likelihood(top, {"action1": a1, "action2": a2}, q, o, templates)
        return dict(lik, top_logprobs=top), "ok"

    return parse


def collect_top_logprobs(backend, store, ordered, templates, systems: dict, question_types, common: dict, *,
                         samples: int, top_logprobs: int = 20, seed: int = 0, limit=None, compress_every: int = 20,
                         progress: bool = False, desc: str = "top_logprobs"):
    """Send the requests of the scenarios ``ordered`` (:func:`logprob_tasks`) that are not done in ``store``.

    ``compress_every`` scenarios at a time through :func:`moralkit.collect.runner.run_tasks` (records are
    refreshed in ``records.jsonl.gz`` after each chunk); ``limit`` caps the scenarios started in this session.
    Returns the session's :class:`~moralkit.collect.runner.RunReport`.
    """
    from .backends import Sampling
    from .runner import RunReport, run_tasks

    def done(t):
        return bool(store.attempts(t.task))

    per = [logprob_tasks(sc, question_types, templates, systems, samples=samples, top_logprobs=top_logprobs)
           for sc in ordered]
    todo = [ts for ts in per if not all(done(t) for t in ts)]
    if limit is not None:
        todo = todo[:int(limit)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(ts) for ts in todo), desc=desc, unit="request")
    parse = _parser(templates)
    rep = RunReport()
    chunk = max(1, int(compress_every or len(todo) or 1))
    try:
        for i in range(0, len(todo), chunk):
            tasks = [t for ts in todo[i:i + chunk] for t in ts]
            if rep.stopped:
                rep = rep.merge(RunReport(tasks=len(tasks), undone=[t.task for t in tasks if not done(t)]))
                continue
            rep = rep.merge(run_tasks(backend, store, tasks, parse, seed=seed, sampling=Sampling(temperature=1.0),
                                      max_attempts=1, common=common, bar=bar, parse_completion=True))
            store.compress()
    finally:
        if bar is not None:
            bar.close()
    return rep


def top_logprob_rows(records, label=None) -> list[dict]:
    """Likelihood-table rows of a ``top_logprobs`` collection's records (one per scenario and form).

    A form scored from ``top_logprobs`` gives its row as :func:`form_likelihood` computed it; a sampled
    ``repeat`` form gives the shares of its ``M`` answers (``mass_action1 = n1 / M``, ``covered = (n1 + n2) / M``,
    ``p_action1 = n1 / (n1 + n2)``, 0.5 when no answer is valid; eq. 7), ``n_answers = M`` and
    ``estimator = "sampling"``. A scenario enters the table once every form of it is complete.
    """
    from collections import defaultdict

    forms: dict = defaultdict(dict)  # scenario -> (type, ordering) -> row (or, sampled, {sample: decision})
    meta = {}
    for r in records:
        if r.get("kind", "attempt") != "attempt" or r.get("part") not in ("top_logprobs", "sample"):
            continue
        sid, key = r["scenario_id"], (r["question_type"], int(r["ordering"]))
        meta[sid] = (label or r["label"], int(r["n_forms"]))
        if r["part"] == "top_logprobs":
            if r.get("status") == "ok":
                p = r["parsed"]
                forms[sid][key] = {k: p[k] for k in ("mass_action1", "mass_action2", "covered", "uncovered",
                                                     "p_action1", "p_action2", "n_answers", "estimator")}
        else:
            forms[sid].setdefault(key, {"n": int(r["n_samples"]), "answers": {}})["answers"].setdefault(
                int(r["sample"]), r["parsed"])
    rows = []
    for sid, fs in forms.items():
        model, n_forms = meta[sid]
        done = {k: v for k, v in fs.items() if "answers" not in v or len(v["answers"]) == v["n"]}
        if len(done) != n_forms:
            continue
        for (q, o), v in sorted(done.items()):
            if "answers" in v:
                n1 = sum(a == "action1" for a in v["answers"].values())
                n2 = sum(a == "action2" for a in v["answers"].values())
                m = v["n"]
                v = dict(mass_action1=n1 / m, mass_action2=n2 / m, covered=(n1 + n2) / m, uncovered=1 - (n1 + n2) / m,
                         p_action1=n1 / (n1 + n2) if n1 + n2 else 0.5, n_answers=m, estimator="sampling")
                v["p_action2"] = 1.0 - v["p_action1"]
            rows.append(dict(model=model, scenario_id=sid, question_type=q, ordering=o, **v))
    return rows
