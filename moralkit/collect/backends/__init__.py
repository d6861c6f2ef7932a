"""Backends: chat messages in, text out, with sampling parameters and a seed.

Three backends share one small interface, :class:`Backend`:

- :class:`TransformersBackend`: a local Hugging Face model (hub id, local
  directory, a ``.gguf`` file, or a name from :mod:`moralkit.collect.localmodels`),
  its chat template, batched generation with left padding, CUDA when present
  (else CPU in bfloat16), ``torch.manual_seed`` before every batch.
- :class:`OpenAIBackend`: the official ``openai`` client against the OpenAI API
  or any OpenAI-compatible server (``base_url``: vLLM, llama.cpp's server,
  Ollama, OpenRouter, Together, Gemini's and Anthropic's compatibility endpoints,
  :mod:`moralkit.collect.server`).
- :class:`AnthropicBackend`: the official ``anthropic`` client against Anthropic's
  Messages API.

The two API backends read the key from an environment variable and never log or
write it; they retry with exponential backoff on rate limits, timeouts and server
errors, keep ``concurrency`` requests in flight (asyncio) under a requests-per-minute
cap, and stop at once on what no retry can fix (:data:`FATAL_STATUS`: a 400 or 422
names the parameter the server rejected and the flag that changes it). They send
only what the user set or the survey needs (:meth:`OpenAIBackend.request_kwargs`,
:meth:`AnthropicBackend.request_kwargs`) and log every parameter set they sent
(:meth:`APIBackend.take_request_log`), which the runner writes to the manifest.

Build one with :func:`make_backend`.

References
----------
Seror (2025), Section 2.1 (one request per round, repeated up to three times);
Scherrer et al. (2023), Section 3.3 (temperature-1 sampling, context reset per question).
"""

from __future__ import annotations

from ...errors import MoralkitError
from .anthropic_api import ANTHROPIC_SAMPLING_VERSION, AnthropicBackend
from .api import (
    PARAMETER_FLAGS,
    REASONING_MAX_TOKENS,
    REASONING_MODEL_RE,
    APIBackend,
    RateLimiter,
    is_reasoning_model,
    rejected_parameters,
    short_error,
    survey_max_tokens,
)
from .base import (
    FATAL_STATUS,
    LENGTH_REASONS,
    Backend,
    Completion,
    MalformedResponse,
    Request,
    Sampling,
    anthropic_completion_from_json,
    check_sampling,
    completion_from_json,
    merge_request_logs,
    parse_retry_after,
    retry_delay,
    run_sync,
)
from .local import TransformersBackend
from .openai_api import OpenAIBackend

_RateLimiter = RateLimiter  # the names tests and older code use
_short = short_error

__all__ = ["Sampling", "Request", "Completion", "Backend", "TransformersBackend", "APIBackend", "OpenAIBackend",
           "AnthropicBackend", "make_backend", "BACKENDS", "retry_delay", "parse_retry_after", "run_sync",
           "completion_from_json", "anthropic_completion_from_json", "MalformedResponse", "FATAL_STATUS",
           "LENGTH_REASONS", "is_reasoning_model", "REASONING_MAX_TOKENS", "survey_max_tokens", "check_sampling",
           "rejected_parameters", "PARAMETER_FLAGS", "merge_request_logs", "ANTHROPIC_SAMPLING_VERSION",
           "REASONING_MODEL_RE", "RateLimiter", "short_error"]


BACKENDS = {"transformers": TransformersBackend, "openai": OpenAIBackend, "anthropic": AnthropicBackend}


def make_backend(kind: str, model, **kwargs) -> Backend:
    """Build a backend: ``make_backend("transformers", "qwen2.5-coder-0.5b-instruct")``,
    ``make_backend("openai", "gpt-4o-mini")``, ``make_backend("openai", "m", base_url="http://127.0.0.1:8000/v1")``,
    ``make_backend("anthropic", "claude-sonnet-4-5")``."""
    if kind not in BACKENDS:
        raise MoralkitError(f"unknown backend {kind!r}; choose one of {sorted(BACKENDS)}")
    return BACKENDS[kind](model, **kwargs)

