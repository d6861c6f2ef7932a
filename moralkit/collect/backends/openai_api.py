"""The OpenAI chat-completions API and OpenAI-compatible servers (:class:`OpenAIBackend`)."""

from __future__ import annotations

import os
import time

from ...checks import check_choice
from ...errors import MoralkitError
from .api import APIBackend, is_reasoning_model
from .base import Sampling, completion_from_json


def _host(url) -> str:
    from urllib.parse import urlsplit

    return (urlsplit(str(url)).hostname or "").lower() if url else ""


# Where each provider documents its OpenAI-compatible endpoint and the parameters it takes (the README's
# table of providers is drawn from these pages):
# - OpenAI: https://platform.openai.com/docs/api-reference/chat/create
# - Anthropic's compatibility layer (base URL https://api.anthropic.com/v1/; temperature 0-1; seed, logprobs,
#   reasoning_effort ignored): https://platform.claude.com/docs/en/api/openai-sdk
# - Gemini (https://generativelanguage.googleapis.com/v1beta/openai/): https://ai.google.dev/gemini-api/docs/openai
# - OpenRouter (https://openrouter.ai/api/v1; temperature, top_p, top_k, seed, max_tokens):
#   https://openrouter.ai/docs/api_reference/parameters
# - Together (https://api.together.ai/v1): https://docs.together.ai/docs/inference/openai-compatibility
# - vLLM (extra parameters such as top_k through extra_body):
#   https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
# - Ollama (http://localhost:11434/v1; temperature, top_p, max_tokens, seed, reasoning_effort):
#   https://docs.ollama.com/api/openai-compatibility
# - llama.cpp's llama-server (http://localhost:8080/v1; top_k among its extra fields):
#   https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md


class OpenAIBackend(APIBackend):
    """Chat completions through the official ``openai`` client (async).

    Parameters
    ----------
    model : str
        Model name as the server knows it.
    base_url : str, optional
        An OpenAI-compatible endpoint (e.g. ``http://127.0.0.1:8000/v1``); default the OpenAI API.
        Credentials inside it are used but never recorded (:func:`moralkit.collect.secrets.strip_url`).
    api_key_env : str, default "OPENAI_API_KEY"
        Name of the environment variable holding the key. The key itself is
        never stored on the object, logged or written. When the variable is unset
        and ``base_url`` is given, the placeholder key ``"EMPTY"`` is sent (local servers).
    concurrency : int, default 4
        Requests in flight (the collectors keep this many busy at all times).
    rpm : int, optional
        Requests-per-minute cap.
    max_retries : int, default 6
        Retries of a request on rate limits (429), server errors (5xx), timeouts, dropped
        connections and malformed responses (:data:`FATAL_STATUS` stop at once), with
        :func:`retry_delay` (exponential backoff with jitter, ``Retry-After`` honoured).
    timeout : float, default 60
        Seconds per request.
    backoff : float, default 1
        Base of the exponential backoff, in seconds.
    send_seed : bool, default True
        Send ``seed`` (honoured by OpenAI, best effort, and most local servers).
    label : str, optional
        Model label recorded with each answer (default ``model``).
    reasoning : bool, optional
        Whether the model is a reasoning model (default: :func:`is_reasoning_model` of its name, or
        ``True`` once the server asked for ``max_completion_tokens``).
    max_tokens_param : {"auto", "max_tokens", "max_completion_tokens"}
        The name the output budget is sent under. ``"auto"``: ``max_completion_tokens`` for a reasoning
        model, else ``max_tokens`` (what OpenAI-compatible servers read); if the server answers the
        documented 400 "Unsupported parameter: 'max_tokens' ... Use 'max_completion_tokens' instead", the
        backend switches once, re-sends the request and records the switch (:attr:`adaptations`).

    Notes
    -----
    What is sent (:meth:`request_kwargs`): ``model``, ``messages``, the budget, ``temperature`` (always,
    because local servers' defaults differ from the survey's 1.0 -- but not to a reasoning model at 1.0,
    the only value they accept), ``top_p`` only when not 1, ``reasoning_effort`` only when set, ``seed``
    unless ``send_seed=False``, and ``top_k`` when set, in ``extra_body`` (vLLM, Together, OpenRouter,
    llama.cpp and Ollama-compatible servers read it); OpenAI's own API has no ``top_k``, so
    :meth:`check_sampling` refuses it there before any request. References: OpenAI API reference,
    https://platform.openai.com/docs/api-reference/chat/create; vLLM's extra parameters,
    https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html; Anthropic's OpenAI-compatible
    endpoint (``temperature`` 0-1, ``seed``, ``logprobs`` and ``reasoning_effort`` ignored),
    https://platform.claude.com/docs/en/api/openai-sdk.

    Works inside a running event loop (Jupyter): :func:`run_sync` runs the requests on a worker
    thread's loop there.
    """

    name = "openai"
    default_key_env = "OPENAI_API_KEY"

    def __init__(self, model, base_url=None, api_key_env="OPENAI_API_KEY", concurrency=4, rpm=None,
                 max_retries=6, timeout=60.0, backoff=1.0, send_seed=True, label=None, reasoning=None,
                 max_tokens_param="auto"):
        import openai

        super().__init__(model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency, rpm=rpm,
                         max_retries=max_retries, timeout=timeout, backoff=backoff, label=label)
        check_choice(max_tokens_param, ("auto", "max_tokens", "max_completion_tokens"), "max_tokens_param")
        self.send_seed = bool(send_seed)
        self.reasoning = is_reasoning_model(self.remote_model) if reasoning is None else bool(reasoning)
        self.max_tokens_param = max_tokens_param
        self.token_param = (max_tokens_param if max_tokens_param != "auto"
                            else "max_completion_tokens" if self.reasoning else "max_tokens")
        self._openai = openai
        self._version = openai.__version__

    @property
    def openai_api(self) -> bool:
        """Whether the endpoint is OpenAI's own API (no ``top_k`` there)."""
        return self._base_url is None or _host(self._base_url) == "api.openai.com"

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "remote_model": self.remote_model,
                "base_url": self.base_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "rpm": self.rpm, "max_retries": self.max_retries, "timeout": self.timeout,
                "reasoning": self.reasoning, "max_tokens_param": self.token_param, "send_seed": self.send_seed,
                "openai": self._version}

    def check_sampling(self, s: Sampling) -> None:
        """Refuse what this endpoint cannot take, before any request (:class:`~moralkit.errors.MoralkitError`)."""

        if s.top_k is not None and self.openai_api:
            raise MoralkitError("--top-k: OpenAI's API has no top_k parameter (it would answer 400 "
                                "'Unrecognized request argument supplied: top_k'); drop --top-k, or use it with an "
                                "OpenAI-compatible server that takes it (vLLM, Together, OpenRouter, llama.cpp)")
        if _host(self._base_url) == "api.anthropic.com" and s.top_p != 1.0 and s.temperature != 1.0:
            raise MoralkitError("Anthropic's models reject temperature and top_p together (400 '`temperature` and "
                                "`top_p` cannot both be specified'); give --temperature or --top-p, not both")

    def request_kwargs(self, req) -> dict:
        """The parameters of one request, as sent (see the class notes)."""
        s = req.sampling
        kw = {"model": self.remote_model, "messages": list(req.messages)}
        if not (self.reasoning and float(s.temperature) == 1.0):
            kw["temperature"] = float(s.temperature)
        if float(s.top_p) != 1.0:
            kw["top_p"] = float(s.top_p)
        kw[self.token_param] = int(s.max_tokens)
        if s.reasoning_effort is not None:
            kw["reasoning_effort"] = s.reasoning_effort
        if self.send_seed:
            kw["seed"] = int(req.seed)
        extra = dict(req.extra_body or {})
        if s.top_k is not None:
            extra["top_k"] = int(s.top_k)
        if extra:
            kw["extra_body"] = extra
        return kw

    def adapt(self, c, kw) -> bool:
        """Switch ``max_tokens`` to ``max_completion_tokens`` once, when the server says so (documented 400)."""
        if c.status_code != 400 or self.max_tokens_param != "auto" or "max_tokens" not in kw:
            return False
        if "max_completion_tokens" not in (c.error or ""):
            return False
        with self._log_lock:
            if self.token_param == "max_tokens":
                self.token_param = "max_completion_tokens"
                self.reasoning = True
                self.adaptations.append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                         "changed": "max_tokens -> max_completion_tokens",
                                         "because": self._short(c.error, 400)})
        return True

    def _client(self):
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return self._openai.AsyncOpenAI(api_key=key, base_url=self._base_url, timeout=self.timeout, max_retries=0)

    def _sdk(self):
        return self._openai

    async def _post(self, client, kw) -> str:
        raw = await client.chat.completions.with_raw_response.create(**kw)
        return raw.text

    def _parse(self, data):
        return completion_from_json(data)
