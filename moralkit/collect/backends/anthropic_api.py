"""Anthropic's Messages API (:class:`AnthropicBackend`)."""

from __future__ import annotations

import os
import re

from ...errors import MoralkitError
from .api import APIBackend
from .base import Sampling, anthropic_completion_from_json, parse_retry_after


def _anthropic_wait(headers) -> float | None:
    """Seconds to wait from an Anthropic error's headers: ``retry-after``, else the latest reset time of an
    exhausted ``anthropic-ratelimit-*`` limit (https://docs.claude.com/en/api/rate-limits)."""
    if headers is None:
        return None
    ra = parse_retry_after(headers.get("retry-after"))
    if ra is not None:
        return ra
    import datetime as _dt

    waits = []
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        if headers.get(f"anthropic-ratelimit-{kind}-remaining") == "0":
            try:
                t = _dt.datetime.fromisoformat(str(headers.get(f"anthropic-ratelimit-{kind}-reset")).replace("Z", "+00:00"))
            except ValueError:
                continue
            waits.append((t - _dt.datetime.now(_dt.timezone.utc)).total_seconds())
    return max(0.0, max(waits)) if waits else None


#: The Anthropic API version before 2026-10-21, the last that takes ``temperature``, ``top_p`` and ``top_k``.
ANTHROPIC_SAMPLING_VERSION = "2023-06-01"


class AnthropicBackend(APIBackend):
    """Anthropic's Messages API through the official ``anthropic`` client (async).

    Same parameters as :class:`OpenAIBackend` (``api_key_env`` default ``"ANTHROPIC_API_KEY"``; no
    ``send_seed``: Anthropic has no seed, so answers are not reproducible; every record's ``seed`` is
    the one moralkit derived, unsent), and:

    api_version : str, optional
        The ``anthropic-version`` header. Default: the SDK's (``2026-10-21`` for ``anthropic`` 2.x). That
        version takes no ``temperature``, ``top_p`` or ``top_k`` (a 400 "temperature: Extra inputs are not
        permitted", even at their defaults): the model samples at its default, which is what both surveys
        ask for (temperature 1, Anthropic's documented default in ``2023-06-01``). To sample otherwise, pass
        ``api_version="2023-06-01"`` (``--anthropic-version 2023-06-01``): the parameters are then sent.

    Notes
    -----
    What is sent (:meth:`request_kwargs`): ``model``, ``messages`` (user and assistant turns), ``system``
    (the system message, top level), ``max_tokens`` (required), and ``output_config.effort`` when
    ``reasoning_effort`` is set (Anthropic's effort: ``low``, ``medium``, ``high``, ``xhigh``, ``max``).
    With ``api_version="2023-06-01"`` also ``temperature`` -- or ``top_p`` instead when ``top_p`` is set and
    the temperature is the default 1.0, because recent models reject the two together -- and ``top_k``
    when set. :meth:`check_sampling` refuses, before any request, non-default sampling under the new API
    version, a temperature above 1 (the range is 0-1), and a temperature other than 1 with ``top_p``.
    A ``stop_reason`` of ``"max_tokens"`` is the output budget running out. Errors are ``{"type": "error",
    "error": {"type", "message"}}``: 429 ``rate_limit_error`` and 529 ``overloaded_error`` are retried
    after ``retry-after`` (or the reset time of the exhausted ``anthropic-ratelimit-*`` limit);
    :data:`FATAL_STATUS` stop the run. References: https://docs.claude.com/en/api/messages,
    https://docs.claude.com/en/api/errors, https://docs.claude.com/en/api/rate-limits; API version
    2026-10-21 and its removal of the sampling parameters:
    https://developersdigest.tech/blog/claude-api-version-2026-10-21-sdk-migration (Anthropic's
    migration guide as summarised there; the installed SDK's ``messages.create`` has no sampling
    parameters).
    """

    name = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"
    reasoning = False

    def __init__(self, model, base_url=None, api_key_env="ANTHROPIC_API_KEY", concurrency=4, rpm=None,
                 max_retries=6, timeout=60.0, backoff=1.0, label=None, api_version=None):
        import anthropic

        super().__init__(model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency, rpm=rpm,
                         max_retries=max_retries, timeout=timeout, backoff=backoff, label=label)
        if api_version is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(api_version)):
            raise MoralkitError(f"api_version must be a date such as '2023-06-01', got {api_version!r}")
        sdk_version = getattr(getattr(anthropic, "_constants", None), "ANTHROPIC_API_VERSION", "2026-10-21")
        self.api_version = str(api_version or sdk_version)
        self._anthropic = anthropic
        self._version = anthropic.__version__

    @property
    def takes_sampling(self) -> bool:
        """Whether the API version takes ``temperature``, ``top_p`` and ``top_k`` (before 2026-10-21)."""
        return self.api_version < "2026-10-21"

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "remote_model": self.remote_model,
                "base_url": self.base_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "rpm": self.rpm, "max_retries": self.max_retries, "timeout": self.timeout, "send_seed": False,
                "api_version": self.api_version, "sampling_sent": self.takes_sampling,
                "anthropic": self._version}

    def check_sampling(self, s: Sampling) -> None:

        default = float(s.temperature) == 1.0 and float(s.top_p) == 1.0 and s.top_k is None
        if not self.takes_sampling and not default:
            raise MoralkitError(
                f"Anthropic's API version {self.api_version} takes no temperature, top_p or top_k (400 'Extra inputs "
                "are not permitted', even at their defaults): collect at the model's default sampling (drop "
                "--temperature, --top-p and --top-k: temperature 1 is what the surveys use), or pass "
                f"--anthropic-version {ANTHROPIC_SAMPLING_VERSION} to send them")
        if s.temperature > 1:
            raise MoralkitError(f"--temperature {s.temperature}: Anthropic's Messages API takes a temperature "
                                "from 0 to 1")
        if s.top_p != 1.0 and s.temperature != 1.0:
            raise MoralkitError("Anthropic's models reject temperature and top_p together (400 '`temperature` and "
                                "`top_p` cannot both be specified'); give --temperature or --top-p, not both")

    def request_kwargs(self, req) -> dict:
        s = req.sampling
        system = "\n\n".join(m["content"] for m in req.messages if m["role"] == "system")
        kw = {"model": self.remote_model, "messages": [dict(m) for m in req.messages if m["role"] != "system"],
              "max_tokens": int(s.max_tokens)}
        if system:
            kw["system"] = system
        if s.reasoning_effort is not None:
            kw["output_config"] = {"effort": s.reasoning_effort}
        if self.takes_sampling:  # the SDK (2.x) has no sampling arguments: they go in the body as extra fields
            extra = {}
            if float(s.top_p) != 1.0:
                extra["top_p"] = float(s.top_p)
            else:
                extra["temperature"] = float(s.temperature)
            if s.top_k is not None:
                extra["top_k"] = int(s.top_k)
            kw["extra_body"] = extra
        return kw

    def _client(self):
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return self._anthropic.AsyncAnthropic(api_key=key, base_url=self._base_url, timeout=self.timeout,
                                              max_retries=0, default_headers={"anthropic-version": self.api_version})

    def _sdk(self):
        return self._anthropic

    async def _post(self, client, kw) -> str:
        raw = await client.messages.with_raw_response.create(**kw)
        body = raw.text
        if callable(body):  # the anthropic SDK's AsyncAPIResponse reads its body asynchronously
            body = await body()
        return body

    def _parse(self, data):
        return anthropic_completion_from_json(data)

    def _retry_wait(self, headers):
        return _anthropic_wait(headers)
