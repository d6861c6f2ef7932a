"""A fake OpenAI chat-completions API on 127.0.0.1 (a test double: answers are a hash of prompt and seed).

It imitates what the collector meets on OpenAI's API and on OpenAI-compatible servers:

- **chat models** (``kind="chat"``): ``temperature``, ``top_p``, ``max_tokens`` or ``max_completion_tokens``,
  ``seed``; an answer longer than the budget is cut with ``finish_reason: "length"``;
- **reasoning models** (``kind="reasoning"``, the o-series and GPT-5 family), which answer HTTP 400 with
  OpenAI's documented bodies to ``max_tokens`` ("Unsupported parameter: 'max_tokens' is not supported with
  this model. Use 'max_completion_tokens' instead.", ``param: "max_tokens"``, ``code:
  "unsupported_parameter"``), to ``top_p`` and to a ``temperature`` other than 1 (``code:
  "unsupported_value"``). They spend completion tokens on hidden reasoning (:data:`REASONING_TOKENS` by
  ``reasoning_effort``, default ``"medium"``): with a budget too small for reasoning plus answer they return
  empty content with ``finish_reason: "length"``, and ``usage.completion_tokens_details.reasoning_tokens``
  says how many went to reasoning;
- ``top_k`` is refused like any unknown field on OpenAI's own API (``accepts_top_k=False``, 400
  "Unrecognized request argument supplied: top_k") and accepted when ``accepts_top_k=True`` (vLLM, Together,
  OpenRouter and llama.cpp take it, outside OpenAI's schema);
- every answer has a ``system_fingerprint`` (:attr:`FakeOpenAI.fingerprint`; change it to imitate a backend
  update) and every response the ``x-ratelimit-*`` and ``x-request-id`` headers; 429 comes with
  ``retry-after``; an unknown model is a 404 ``model_not_found``.

References
----------
OpenAI API reference, chat completions: https://platform.openai.com/docs/api-reference/chat/create
(``max_completion_tokens`` "including visible output tokens and reasoning tokens"; ``max_tokens`` "not
compatible with o-series models"; ``system_fingerprint``); the 400 bodies as reported in
teilomillet/gollm#33, griptape-ai/ComfyUI-Griptape#312 and dsp05/overleaf-copilot#43.
"""

from __future__ import annotations

from dataclasses import dataclass

from .faultserver import fake_answer
from .httpfake import FakeHTTPServer, Reply, count_tokens, stable_hash

__all__ = ["FakeOpenAI", "ModelSpec", "reject", "completion", "openai_error", "REASONING_TOKENS", "DEFAULT_MODELS", "REASONING_EFFORTS"]

#: Hidden reasoning tokens a fake reasoning model spends per request, by ``reasoning_effort``.
REASONING_TOKENS = {"none": 0, "minimal": 16, "low": 64, "medium": 192, "high": 640, "xhigh": 1280}

#: The ``reasoning_effort`` values OpenAI documents (models accept subsets of them).
REASONING_EFFORTS = tuple(REASONING_TOKENS)


@dataclass(frozen=True)
class ModelSpec:
    """A fake model: ``kind`` is ``"chat"`` or ``"reasoning"``."""

    kind: str = "chat"


#: Models the fake knows by default: two reasoning models whose names follow OpenAI's patterns, one
#: that does not (a gateway alias: the client must learn from the 400), and two chat models.
DEFAULT_MODELS = {"o4-mini": ModelSpec("reasoning"), "gpt-5-mini": ModelSpec("reasoning"),
                  "house-reasoner": ModelSpec("reasoning"), "gpt-4.1-mini": ModelSpec("chat"),
                  "fake-chat": ModelSpec("chat")}


def openai_error(message, type_="invalid_request_error", param=None, code=None) -> dict:
    """OpenAI's JSON error body (``{"error": {message, type, param, code}}``)."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class FakeOpenAI(FakeHTTPServer):
    """The fake chat-completions API; ``srv.url`` is the ``base_url`` (``http://127.0.0.1:PORT/v1``).

    Parameters
    ----------
    models : dict, optional
        Model name -> :class:`ModelSpec` (default :data:`DEFAULT_MODELS`).
    accepts_top_k : bool, default False
        Accept ``top_k`` (an OpenAI-compatible server such as vLLM) or refuse it (OpenAI's API).
    fingerprint : str
        The ``system_fingerprint`` of every answer.
    **kw
        :class:`~moralkit.testing.httpfake.FakeHTTPServer` options (``api_key``, faults, latency).
    """

    routes = (("POST", r"/v1/chat/completions", "chat_completions"),
              ("GET", r"/v1/models", "list_models"))

    def __init__(self, models=None, accepts_top_k=False, fingerprint="fp_fake0001", **kw):
        super().__init__(**kw)
        self.models = dict(DEFAULT_MODELS if models is None else models)
        self.accepts_top_k = bool(accepts_top_k)
        self.fingerprint = fingerprint
        self.remaining = 10_000

    # ------------------------------------------------------------------ provider shape
    def error_body(self, status, kind, message):
        types = {"rate_limit": "requests", "authentication": "invalid_request_error",
                 "not_found": "invalid_request_error"}
        codes = {"rate_limit": "rate_limit_exceeded", "authentication": "invalid_api_key"}
        return openai_error(message, types.get(kind, "server_error" if status >= 500 else "invalid_request_error"),
                             None, codes.get(kind))

    def auth_ok(self, headers):
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"

    def common_headers(self):
        with self._lock:
            self.remaining = max(0, self.remaining - 1)
            rem = self.remaining
        return {"x-request-id": f"req_{stable_hash(self.seed, self.n, 'r') % 16**16:016x}",
                "x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": str(rem),
                "x-ratelimit-reset-requests": "6ms", "x-ratelimit-limit-tokens": "2000000",
                "x-ratelimit-remaining-tokens": "1999000", "x-ratelimit-reset-tokens": "30ms"}

    # ------------------------------------------------------------------ routes
    def list_models(self, body, headers, match):
        return Reply(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake"}
                                                       for m in self.models]})

    def _reject(self, body, spec):
        return reject(body, spec, self.accepts_top_k)

    def chat_completions(self, body, headers, match):
        model = body.get("model")
        spec = self.models.get(model)
        if spec is None:
            return Reply(404, openai_error(f"The model `{model}` does not exist or you do not have access to it.",
                                            param="model", code="model_not_found"))
        bad = self._reject(body, spec)
        if bad is not None:
            return Reply(400, bad)
        return self.answer(body, spec)

    def answer(self, body, spec):
        """The 200 answer to a valid request (also a batch line's, :mod:`moralkit.testing.fake_batches`)."""
        out = completion(body, spec, self.fingerprint, self.next_id("chatcmpl-"), self.prompt_tokens)
        self.log_usable(out["id"], out["choices"][0]["message"]["content"])
        return Reply(200, out)


def reject(body, spec, accepts_top_k=False):
    """The 400 body a chat-completions request earns from a model ``spec``, or None."""
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return openai_error("Missing required parameter: 'messages'.", param="messages",
                             code="missing_required_parameter")
    if "top_k" in body and not accepts_top_k:
        return openai_error("Unrecognized request argument supplied: top_k")
    if "max_tokens" in body and "max_completion_tokens" in body:
        return openai_error("max_tokens and max_completion_tokens cannot both be set", param="max_tokens",
                             code="invalid_value")
    if spec.kind == "reasoning":
        if "max_tokens" in body:
            return openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                 "Use 'max_completion_tokens' instead.", param="max_tokens",
                                 code="unsupported_parameter")
        if "top_p" in body:
            return openai_error("Unsupported parameter: 'top_p' is not supported with this model.",
                                 param="top_p", code="unsupported_parameter")
        t = body.get("temperature")
        if t is not None and float(t) != 1.0:
            return openai_error(f"Unsupported value: 'temperature' does not support {t} with this model. "
                                 "Only the default (1) value is supported.", param="temperature",
                                 code="unsupported_value")
        eff = body.get("reasoning_effort")
        if eff is not None and eff not in REASONING_TOKENS:
            return openai_error(f"Unsupported value: 'reasoning_effort' does not support {eff!r} with this "
                                 f"model. Supported values are: {', '.join(map(repr, REASONING_EFFORTS))}.",
                                 param="reasoning_effort", code="unsupported_value")
    elif "reasoning_effort" in body:
        return openai_error("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                             param="reasoning_effort", code="unsupported_parameter")
    return None


def completion(body, spec, fingerprint="fp_fake0001", rid="chatcmpl-fake", prompt_tokens=None) -> dict:
    """The chat-completion body a valid request gets: the fake answer, cut by the output budget after a
    reasoning model's hidden reasoning, with its usage."""
    messages, model = body["messages"], body.get("model")
    answer = fake_answer(messages, body.get("seed"))
    budget = body.get("max_completion_tokens", body.get("max_tokens"))
    reasoning = REASONING_TOKENS[body.get("reasoning_effort") or "medium"] if spec.kind == "reasoning" else 0
    words = answer.split(" ")
    need = reasoning + count_tokens(answer)
    if budget is None or int(budget) >= need:
        text, finish, used = answer, "stop", need
    elif int(budget) <= reasoning:  # the budget went to hidden reasoning: no visible answer
        text, finish, used = "", "length", int(budget)
    else:  # cut the answer to what the budget leaves
        left, kept = int(budget) - reasoning, []
        for w in words:
            if count_tokens(" ".join(kept + [w])) > left:
                break
            kept.append(w)
        text, finish, used = " ".join(kept), "length", int(budget)
    n_in = (prompt_tokens(messages) if prompt_tokens is not None
            else sum(count_tokens(str(m.get("content", ""))) + 4 for m in messages))
    usage = {"prompt_tokens": n_in, "completion_tokens": used, "total_tokens": n_in + used,
             "completion_tokens_details": {"reasoning_tokens": min(reasoning, used)}}
    out = {"id": rid, "object": "chat.completion", "created": 1_764_000_000, "model": model,
           "system_fingerprint": fingerprint,
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None, "finish_reason": finish}],
           "usage": usage}
    return out
