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

from ..errors import DataError, MoralkitError

__all__ = ["LOGPROB_FORMS", "logprob_request", "parse_top_logprobs", "form_likelihood", "LogprobScorer"]

#: The question forms scored from log-probabilities: (question_type, ordering).
LOGPROB_FORMS = (("ab", 0), ("ab", 1), ("compare", 0), ("compare", 1))


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
    from .likelihood import persona_system

    if question_type not in LOGPROB_QUESTION_TYPES:
        raise MoralkitError(f"the {question_type!r} form cannot be scored from log-probabilities (only "
                            f"{LOGPROB_QUESTION_TYPES}); sample it instead (moralkit collect moralchoice)")
    if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 1 <= top_logprobs <= 20:
        raise MoralkitError(f"top_logprobs must be an integer in [1, 20] (OpenAI's range), got {top_logprobs!r}")
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
