"""Fakes of the OpenAI-compatible endpoints of other providers and servers (test doubles on 127.0.0.1).

Each :data:`PROFILES` entry imitates one row of the README's provider table: the path the provider serves
chat completions under (so that the documented ``base_url`` shape is what the SDK is pointed at), the request
fields its documentation lists (a field outside the list is a 400, so a client that sends more than the
provider documents is caught), and the constraints it documents. Answers, usage and errors are those of
:class:`moralkit.testing.fake_openai.FakeOpenAI` (hash answers, never data).

What each profile enforces, and where it is documented:

- ``gemini``: Google's OpenAI compatibility, base URL ``.../v1beta/openai/``
  (https://ai.google.dev/gemini-api/docs/openai). The documented chat fields are OpenAI's (``model``,
  ``messages``, ``max_tokens``, ``max_completion_tokens``, ``temperature``, ``top_p``, ``n``, ``seed``,
  ``stop``, ``reasoning_effort``, ...); ``top_k`` is not one of them (Gemini's own ``topK`` goes through
  ``extra_body.google``), so it is refused, as Google refuses unknown JSON names.
- ``openrouter``: base URL ``https://openrouter.ai/api/v1`` (https://openrouter.ai/docs/api-reference/overview,
  parameters: https://openrouter.ai/docs/api-reference/parameters): ``max_tokens`` in [1, context), ``temperature``
  in [0, 2], ``top_p``, ``top_k``, ``seed``, ``n`` and more are accepted.
- ``together``: base URL ``https://api.together.xyz/v1`` (https://docs.together.ai/docs/inference/chat/parameters):
  ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``repetition_penalty``, ``seed``, ``n``, ``logprobs``.
- ``vllm``: ``vllm serve``, base URL ``http://HOST:8000/v1``
  (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html): OpenAI's chat fields plus the
  "extra parameters" of its sampling (``top_k``, ``min_p``, ``repetition_penalty``, ...).
- ``ollama``: base URL ``http://localhost:11434/v1`` (https://docs.ollama.com/api/openai-compatibility): the
  "supported request fields" are ``model``, ``messages``, ``frequency_penalty``, ``presence_penalty``,
  ``response_format``, ``seed``, ``stop``, ``stream``, ``stream_options``, ``temperature``, ``top_p``,
  ``max_tokens``, ``tools``, ``tool_choice``, ``reasoning_effort``, ``reasoning``, ``logprobs``,
  ``top_logprobs``: no ``top_k``, no ``n`` (the real server ignores what it does not list; the fake refuses it,
  so that a parameter moralkit records as sent is one the server applies).
- ``llamacpp``: ``llama-server``, base URL ``http://HOST:8080/v1``
  (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md): OpenAI's chat fields plus its
  native sampling fields (``top_k``, ``min_p``, ``n_predict``, ...); more than one choice is refused ("Only one
  completion choice is allowed").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fake_openai import FakeOpenAI, ModelSpec, openai_error

__all__ = ["FakeCompatible", "Profile", "PROFILES"]

#: The chat-completion request fields of OpenAI's API reference that these providers share.
OPENAI_FIELDS = ("model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "seed",
                 "stop", "stream", "stream_options", "response_format", "tools", "tool_choice", "frequency_penalty",
                 "presence_penalty", "logprobs", "top_logprobs", "logit_bias", "user", "reasoning_effort")


@dataclass(frozen=True)
class Profile:
    """One provider's OpenAI-compatible endpoint: where it lives and what it accepts."""

    name: str
    prefix: str  # the path the base URL ends with
    fields: tuple  # request fields accepted
    max_n: int | None = None  # most choices per request (None: no limit)
    temperature_max: float = 2.0
    docs: str = ""
    extra: tuple = field(default_factory=tuple)


PROFILES = {
    "gemini": Profile("gemini", "/v1beta/openai", OPENAI_FIELDS,
                      docs="https://ai.google.dev/gemini-api/docs/openai"),
    "openrouter": Profile("openrouter", "/api/v1", OPENAI_FIELDS + ("top_k", "min_p", "top_a", "repetition_penalty",
                                                                    "provider", "models", "transforms", "reasoning"),
                          docs="https://openrouter.ai/docs/api-reference/parameters"),
    "together": Profile("together", "/v1", OPENAI_FIELDS + ("top_k", "repetition_penalty", "min_p"),
                        docs="https://docs.together.ai/docs/inference/chat/parameters"),
    "vllm": Profile("vllm", "/v1", OPENAI_FIELDS + ("top_k", "min_p", "repetition_penalty", "best_of",
                                                   "prompt_logprobs", "guided_choice"),
                    docs="https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"),
    "ollama": Profile("ollama", "/v1", ("model", "messages", "frequency_penalty", "presence_penalty",
                                       "response_format", "seed", "stop", "stream", "stream_options", "temperature",
                                       "top_p", "max_tokens", "tools", "tool_choice", "reasoning_effort", "reasoning",
                                       "logprobs", "top_logprobs"),
                      docs="https://docs.ollama.com/api/openai-compatibility"),
    "llamacpp": Profile("llamacpp", "/v1", OPENAI_FIELDS + ("top_k", "min_p", "n_predict", "repeat_penalty",
                                                           "cache_prompt", "grammar"), max_n=1,
                        docs="https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md"),
}


class FakeCompatible(FakeOpenAI):
    """``FakeCompatible("ollama")``: the fake chat-completions endpoint of one :data:`PROFILES` entry;
    ``srv.url`` is the ``base_url`` (``http://127.0.0.1:PORT`` + the profile's path)."""

    def __init__(self, profile: str, models=None, **kw):
        self.profile = PROFILES[profile]
        self.prefix = self.profile.prefix
        self.routes = (("POST", self.prefix + r"/chat/completions", "chat_completions"),
                       ("GET", self.prefix + r"/models", "list_models"))
        super().__init__(models=models or {"fake-chat": ModelSpec("chat")},
                         accepts_top_k="top_k" in self.profile.fields, **kw)

    def _reject(self, body, spec):
        p = self.profile
        unknown = [k for k in body if k not in p.fields]
        if unknown:
            return openai_error(f"Unrecognized request argument supplied: {unknown[0]} "
                                 f"({p.name} does not document it: {p.docs})", param=unknown[0])
        if p.max_n is not None and int(body.get("n", 1) or 1) > p.max_n:
            return openai_error("Only one completion choice is allowed", param="n")
        t = body.get("temperature")
        if t is not None and not 0 <= float(t) <= p.temperature_max:
            return openai_error(f"temperature must be in [0, {p.temperature_max}]", param="temperature")
        return super()._reject(body, spec)
