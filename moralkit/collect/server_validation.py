"""What one request may ask of ``moralkit serve``, and the check of every field of its body.

:class:`ServerLimits` (the caps), :class:`ApiError` (an HTTP error answer in OpenAI's shape) and
:func:`validate_request` (a chat-completions body, field by field, to the normalised parameters the
handler of :mod:`moralkit.collect.server` passes to the engine). The accepted fields and the limits are
listed in :mod:`moralkit.collect.server`'s docstring; everything here is also importable from there.

References
----------
OpenAI API reference, "Create chat completion" (https://platform.openai.com/docs/api-reference/chat/create):
the fields, ``top_logprobs`` ("an integer between 0 and 20 ... ``logprobs`` must be set to ``true`` if
this parameter is used") and the error body ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..checks import check_int
from ..errors import MoralkitError
from .backends import Sampling

__all__ = ["ServerLimits", "ApiError", "validate_request", "MAX_TOP_LOGPROBS"]

#: OpenAI's bound on ``top_logprobs`` (API reference, "Create chat completion").
MAX_TOP_LOGPROBS = 20

#: Fields accepted and ignored (they do not change the answer).
_IGNORED_FIELDS = frozenset({"user", "metadata", "store", "service_tier"})
_KNOWN_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed",
                           "n", "stream", "logprobs", "top_logprobs", "prompt_logprobs", "add_generation_prompt",
                           "skip_special_tokens"}) | _IGNORED_FIELDS


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask of the server (see the module docstring).

    Attributes
    ----------
    max_tokens : int, default 1024
        Largest ``max_tokens`` / ``max_completion_tokens`` accepted.
    default_max_tokens : int, default 256
        ``max_tokens`` of a request that sends none (at most ``max_tokens``).
    max_prompt_tokens : int, default 4096
        Longest prompt, in tokens after the chat template. Its prefill is one forward pass that cannot
        be stopped (the stop checks run between generated tokens), so this also bounds how long a
        request holds the model before its time-out or disconnect can act. The PSM's prompts have
        about 2,250 tokens.
    max_body_bytes : int, default 1 MiB
        Largest request body.
    request_timeout : float, default 120
        Seconds one generation may run.
    max_queue : int, default 16
        Requests that may wait while one generates.
    queue_timeout : float, default 60
        Seconds a request may wait for the model.
    max_connections : int, default 64
        Open connections (each has a thread).
    read_timeout : float, default 30
        Seconds a connection may stay silent (headers, body, keep-alive).
    """

    max_tokens: int = 1024
    default_max_tokens: int = 256
    max_prompt_tokens: int = 4096
    max_body_bytes: int = 1 << 20
    request_timeout: float = 120.0
    max_queue: int = 16
    queue_timeout: float = 60.0
    max_connections: int = 64
    read_timeout: float = 30.0

    def __post_init__(self):
        for name in ("max_tokens", "default_max_tokens", "max_prompt_tokens", "max_body_bytes", "max_connections",
                     "max_queue"):
            minimum = 0 if name == "max_queue" else 1
            object.__setattr__(self, name, check_int(getattr(self, name), name, minimum=minimum))
        for name in ("request_timeout", "queue_timeout", "read_timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
                raise MoralkitError(f"{name} must be a finite number of seconds > 0, got {v!r}")
        if self.default_max_tokens > self.max_tokens:
            raise MoralkitError(f"default_max_tokens ({self.default_max_tokens}) must not exceed max_tokens "
                                f"({self.max_tokens})")


class ApiError(Exception):
    """An HTTP error answer in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type: str = "invalid_request_error", headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = int(status), message, param, code, type
        self.headers = dict(headers or {})

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# ---------------------------------------------------------------------------------------------- checks
def _bad(msg, param, code="invalid_value"):
    return ApiError(400, msg, param=param, code=code)


def _number(body, name, default, lo, hi, lo_open=False):
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(f"{name} must be a number, got {type(v).__name__}", name, "invalid_type")
    v = float(v)
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        rng = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise _bad(f"{name} must be a finite number in {rng}, got {v!r}", name)
    return v


def _integer(body, name, default, lo, hi):
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer() and math.isfinite(v):
            v = int(v)
        else:
            raise _bad(f"{name} must be an integer, got {v!r}", name, "invalid_type")
    if not lo <= v <= hi:
        raise _bad(f"{name} must be an integer in [{lo}, {hi}], got {v}", name)
    return v


def _flag(body, name, default):
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _bad(f"{name} must be true or false, got {v!r}", name, "invalid_type")
    return v


def _messages(msgs) -> list:
    """``messages``, checked: a non-empty list of ``{role, content}`` text messages (``name`` allowed)."""
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages must be a non-empty list of {role, content}", "messages",
                   "invalid_type" if msgs is not None else "missing_required_parameter")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise _bad(f"messages[{i}] must be an object {{role, content}}", f"messages[{i}]", "invalid_type")
        if m.get("role") not in ("system", "user", "assistant"):
            raise _bad(f"messages[{i}].role must be 'system', 'user' or 'assistant', got {m.get('role')!r}",
                       f"messages[{i}].role")
        if not isinstance(m.get("content"), str):
            raise _bad(f"messages[{i}].content must be a string (text only)", f"messages[{i}].content",
                       "invalid_type")
        extra = sorted(set(m) - {"role", "content", "name"})
        if extra:
            raise _bad(f"messages[{i}] has unsupported field {extra[0]!r}", f"messages[{i}].{extra[0]}",
                       "unsupported_parameter")
    return msgs


def validate_request(body, limits: ServerLimits = ServerLimits()) -> dict:
    """Check every field of a chat-completions request body; the normalised parameters.

    Raises :class:`ApiError` (HTTP 400, ``param`` naming the field) on the first bad field.

    Examples
    --------
    >>> validate_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})["sampling"].max_tokens
    4
    >>> validate_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})
    Traceback (most recent call last):
    ...
    moralkit.collect.server_validation.ApiError: max_tokens must be an integer in [1, 1024], got 0
    """
    if not isinstance(body, dict):
        raise _bad(f"the request body must be a JSON object, got {type(body).__name__}", None, "invalid_type")
    unknown = sorted(k for k in body if k not in _KNOWN_FIELDS)
    if unknown:
        raise _bad(f"unsupported parameter {unknown[0]!r}: this server supports {sorted(_KNOWN_FIELDS)}",
                   unknown[0], "unsupported_parameter")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _bad(f"model must be a string, got {type(model).__name__}", "model", "invalid_type")
    msgs = _messages(body.get("messages"))
    if _flag(body, "stream", False):
        raise _bad("stream=true is not supported", "stream", "unsupported_value")
    _integer(body, "n", 1, 1, 1)
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)
    mt = {k: _integer(body, k, None, 1, limits.max_tokens) for k in ("max_tokens", "max_completion_tokens")}
    if None not in mt.values() and mt["max_tokens"] != mt["max_completion_tokens"]:
        raise _bad("max_tokens and max_completion_tokens differ; send one of them", "max_completion_tokens")
    max_tokens = mt["max_completion_tokens"] or mt["max_tokens"] or limits.default_max_tokens
    seed = _integer(body, "seed", None, -(2 ** 63), 2 ** 64 - 1)
    logprobs = _flag(body, "logprobs", False)
    top = _integer(body, "top_logprobs", None, 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise _bad("top_logprobs needs logprobs=true", "top_logprobs")
    agp = _flag(body, "add_generation_prompt", True)
    sst = _flag(body, "skip_special_tokens", True)
    plp = body.get("prompt_logprobs")
    if plp is not None and (isinstance(plp, bool) or plp != 0):
        raise _bad(f"prompt_logprobs must be null or 0 (the prompt token's own log-probability), got {plp!r}",
                   "prompt_logprobs")
    if not agp and plp is None:
        raise _bad("add_generation_prompt=false is only supported with prompt_logprobs=0 (scoring)",
                   "add_generation_prompt")
    return dict(messages=tuple({"role": m["role"], "content": m["content"]} for m in msgs),
                sampling=Sampling(temperature=temperature, top_p=top_p, max_tokens=int(max_tokens)), seed=seed,
                logprobs=logprobs, top_logprobs=(top or 0) if logprobs else None, prompt_logprobs=plp,
                add_generation_prompt=agp, skip_special_tokens=sst)

