"""What the API backends share (:class:`APIBackend`): key handling, validation, the pool session, the
requests-per-minute limit, retries, one path that sends a request and reads its answer, and the log of the
parameters sent; and what a server's refusal means (:data:`PARAMETER_FLAGS`, :func:`rejected_parameters`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time

from ...checks import check_int
from ...errors import MoralkitError
from .base import (
    FATAL_STATUS,
    Backend,
    Completion,
    MalformedResponse,
    parse_retry_after,
    retry_delay,
    run_sync,
)


class RateLimiter:
    """``--rpm``: at most ``rpm`` request starts in any ``window``-second window (default one minute).

    An :class:`aiolimiter.AsyncLimiter` (a leaky bucket) of capacity 1 that refills every ``window / rpm``
    seconds: starts are evenly spaced, so no window of that length holds more than ``rpm`` of them (a
    bucket of capacity ``rpm`` would let a burst of ``rpm`` follow a window's last starts). Create it inside
    the event loop that uses it.
    """

    def __init__(self, rpm, window=60.0):
        from aiolimiter import AsyncLimiter

        self.rpm = rpm
        self._limiter = AsyncLimiter(1, float(window) / rpm) if rpm else None

    async def wait(self):
        if self._limiter is not None:
            await self._limiter.acquire()



#: The default output budget of reasoning models (:func:`survey_max_tokens`). Their hidden reasoning counts
#: against it, and several thousand reasoning tokens for one short answer are reported
#: (https://community.openai.com/t/limiting-maximum-number-of-reasoning-tokens/1285430); a budget is a cap,
#: not an allocation: only the tokens used are billed. Lower it with ``--max-tokens``, or lower the effort.
REASONING_MAX_TOKENS = 16384

#: Names of OpenAI's reasoning models (o-series, GPT-5 family but its ``-chat`` models), matched against the
#: bare model name. A name behind a gateway prefix (``openai/o3``) is not matched: gateways translate
#: ``max_tokens`` themselves (https://openrouter.ai/docs/api_reference/parameters).
REASONING_MODEL_RE = re.compile(r"^(o[1-9](-[a-z0-9.-]+)?|gpt-5(\.[0-9]+)?(-(?!chat)[a-z0-9.-]+)?)$")

#: The flag that changes each request parameter a server may reject.
PARAMETER_FLAGS = {
    "max_tokens": "--max-tokens (or --max-tokens-param max_completion_tokens)",
    "max_completion_tokens": "--max-tokens (or --max-tokens-param max_tokens)",
    "temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
    "reasoning_effort": "--reasoning-effort", "output_config": "--reasoning-effort", "seed": "--no-seed",
    "model": "--model",
    "messages": "--system / --persona", "system": "--system / --persona",
}


def is_reasoning_model(name) -> bool:
    """Whether ``name`` is one of OpenAI's reasoning models (they take ``max_completion_tokens``, temperature 1).

    Examples
    --------
    >>> [is_reasoning_model(m) for m in ("o3-mini", "o4-mini", "gpt-5", "gpt-5.1-mini", "gpt-5-chat-latest",
    ...                                  "gpt-4o-mini", "openai/o3")]
    [True, True, True, True, False, False, False]
    """
    return bool(REASONING_MODEL_RE.match(str(name or "").lower()))


def survey_max_tokens(backend, default: int) -> int:
    """A survey's output budget on ``backend``: ``default`` (16 for the PSM), or :data:`REASONING_MAX_TOKENS`
    for a reasoning model (``backend.reasoning``), whose hidden reasoning would spend a small budget."""
    return REASONING_MAX_TOKENS if getattr(backend, "reasoning", False) else int(default)



def rejected_parameters(body=None, message: str = "") -> list[str]:
    """The request parameters a 400/422 names: the body's ``param`` (OpenAI), else those quoted in the message.

    Examples
    --------
    >>> rejected_parameters({"error": {"param": "max_tokens", "message": "Unsupported parameter"}})
    ['max_tokens']
    >>> rejected_parameters(None, "`temperature` and `top_p` cannot both be specified for this model.")
    ['temperature', 'top_p']
    >>> rejected_parameters(None, "seed: Extra inputs are not permitted")
    ['seed']
    """
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict):
        if isinstance(err.get("param"), str) and err["param"]:
            return [err["param"].split(".")[0].split("[")[0]]
        message = str(err.get("message") or message or "")
    m = re.match(r"^([a-z_]+)(\.[\w.]+)?: ", message) or re.search(r"argument supplied: ([a-z_]+)", message)
    found = [m.group(1)] if m else re.findall(r"`([a-z_]+)`", message) or re.findall(r"'([a-z_]+)'", message)
    return list(dict.fromkeys(found))


def _rejection_text(status, body, message) -> str:
    params = rejected_parameters(body, message)
    flags = list(dict.fromkeys(PARAMETER_FLAGS[p] for p in params if p in PARAMETER_FLAGS))
    if params:
        head = "the server rejected " + ", ".join(f"'{p}'" for p in params)
        fix = f"; change it with {' / '.join(flags)}" if flags else "; the request sent it (see the manifest's 'sent')"
    else:
        head, fix = "the server rejected the request", "; check --model and the sampling flags"
    return f"{head}{fix}"



class APIBackend(Backend):
    """What the API backends share: key handling, validation, the pool session, retries, the request log.

    Subclasses implement ``_client()`` (an async SDK client without its own retries), ``request_kwargs(req)``
    (the parameters of one request) and ``_send(client, kwargs)`` (one HTTP request, returning a
    :class:`Completion`); see :class:`OpenAIBackend` for the parameters.
    """

    default_key_env = "OPENAI_API_KEY"

    def __init__(self, model, base_url=None, api_key_env=None, concurrency=4, rpm=None, max_retries=6, timeout=60.0,
                 backoff=1.0, label=None):
        from ..secrets import Redactor, check_base_url, check_env_name

        api_key_env = api_key_env or self.default_key_env
        if not model:
            raise MoralkitError("model must be a non-empty model name")
        concurrency = check_int(concurrency, "concurrency", minimum=1)
        rpm = None if rpm is None else check_int(rpm, "rpm", minimum=1)
        max_retries = check_int(max_retries, "max_retries", minimum=0)
        if not float(timeout) > 0 or not float(backoff) >= 0:
            raise MoralkitError(f"timeout must be > 0 and backoff >= 0, got {timeout}, {backoff}")
        self.remote_model = str(model)
        self.model = label or str(model)
        self._base_url = None if base_url is None else check_base_url(base_url)
        self.api_key_env = check_env_name(api_key_env)
        self.concurrency = int(concurrency)
        self.batch_size = self.concurrency * 2
        self.rpm = None if rpm is None else int(rpm)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.rate_window = 60.0
        if not os.environ.get(api_key_env) and base_url is None:
            raise MoralkitError(
                f"no API key: set the environment variable {api_key_env} (or pass base_url for a local server)"
            )
        self._redact = Redactor(self.secrets())  # error texts are redacted before they are cut
        self._limiter = None
        self._log: dict = {}
        self._log_lock = threading.Lock()
        #: parameter changes made during the run after a server's answer (e.g. max_tokens -> max_completion_tokens)
        self.adaptations: list = []

    @property
    def base_url(self):
        """The endpoint without credentials (what is recorded)."""
        from ..secrets import strip_url

        return strip_url(self._base_url)

    def secrets(self) -> list[str]:
        """Values that must never be written or printed: the key and any credentials in ``base_url``."""
        from ..secrets import url_secrets

        key = os.environ.get(self.api_key_env)
        return ([key] if key else []) + url_secrets(self._base_url)

    # -- the request log ---------------------------------------------------------------------
    def _note_sent(self, kw: dict) -> None:
        params = {k: v for k, v in kw.items() if k not in ("messages", "extra_body", "system")}
        params.update(kw.get("extra_body") or {})
        if "seed" in params:
            params["seed"] = "derived per request"
        if "system" in kw:
            params["system"] = "the system message"
        key = json.dumps(params, sort_keys=True, default=str)
        with self._log_lock:
            self._log[key] = self._log.get(key, 0) + 1

    def take_request_log(self) -> dict:
        """``{"sent": [{"params": ..., "requests": n}], "adaptations": [...]}`` since the last call (then cleared).

        ``params`` are the parameters of the request bodies sent, exactly, but for ``messages`` and the system
        message (the prompts; their hashes are in the records) and the seed (derived per request).
        """
        with self._log_lock:
            log, self._log = self._log, {}
            adapt, self.adaptations = self.adaptations, []
        return {"sent": [{"params": json.loads(k), "requests": n} for k, n in log.items()], "adaptations": adapt}

    # -- one try -----------------------------------------------------------------------------
    def open_session(self):
        """An async context manager for a batch of :meth:`acomplete` calls (one HTTP client)."""
        backend = self

        class _Session:
            async def __aenter__(self):
                self.client = backend._client()
                backend._limiter = RateLimiter(backend.rpm, backend.rate_window)
                return self

            async def __aexit__(self, *exc):
                await self.client.close()

            async def complete(self, req):
                return await backend.acomplete(self.client, req)

        return _Session()

    def _short(self, e, n=300) -> str:
        """An error's text, secrets redacted before it is cut to ``n`` characters."""
        return short_error(e, self._redact, n)

    def request_body(self, req) -> dict:
        """The JSON body one request sends: :meth:`request_kwargs` with ``extra_body`` merged in.

        The batch APIs' request lines (:mod:`moralkit.collect.batch`) and the response cache's keys
        (:mod:`moralkit.collect.cache`) use it, so that a batch line or a cache key is the online request.
        """
        kw = self.request_kwargs(req)
        body = {k: v for k, v in kw.items() if k != "extra_body"}
        body.update(kw.get("extra_body") or {})
        return body

    def _failure(self, msg, t0, started, **kw):
        return Completion(text=None, error=self._redact(msg), model=self.model, latency_s=time.perf_counter() - t0,
                          started=started, **kw)

    def _status_failure(self, e, t0, started, retry_after=None):
        """A :class:`Completion` for an HTTP error ``e`` (an SDK ``APIStatusError``)."""
        code = getattr(e, "status_code", None)
        body = getattr(e, "body", None)
        msg = f"HTTP {code} {type(e).__name__}: {self._short(e)}"
        if code in (400, 422):
            msg += f" -- {_rejection_text(code, body, str(e))}"
        return self._failure(msg, t0, started, status_code=code, retry_after=retry_after,
                             fatal=code in FATAL_STATUS)

    async def acomplete(self, client, req) -> Completion:
        """Send one request once (twice when the server asks for another token parameter, see
        :meth:`OpenAIBackend.adapt`). Never raises: any failure is a :class:`Completion` with ``error`` set
        (and ``retry_after``, ``status_code``, ``fatal`` when known)."""
        if self._limiter is not None:
            await self._limiter.wait()
        started = time.time()
        t0 = time.perf_counter()
        for _ in range(2):
            kw = self.request_kwargs(req)
            self._note_sent(kw)
            c = await self._send(client, kw, req, t0, started)
            if c.error is None or not self.adapt(c, kw):
                return c
        return c

    # -- the one path of a request: post, read, classify the failure (hooks per provider below) -------------
    async def _send(self, client, kw, req, t0, started) -> Completion:
        """Send one request and read its answer. Never raises: a body that is not JSON or not a completion,
        an HTTP error (with the provider's wait before a retry), a timeout or a dropped connection is a
        :class:`Completion` with ``error`` set."""
        sdk = self._sdk()
        try:
            body = await self._post(client, kw)
            try:
                data = json.loads(body)
            except ValueError as e:
                raise MalformedResponse(f"the body is not JSON ({e}); it starts with "
                                        f"{self._redact(body)[:80]!r}") from None
            text, meta = self._parse(data)
        except MalformedResponse as e:
            return self._failure(f"MalformedResponse: {self._short(e)}", t0, started, status_code=200)
        except sdk.APIStatusError as e:
            resp = getattr(e, "response", None)
            return self._status_failure(e, t0, started, self._retry_wait(resp.headers if resp is not None else None))
        except (sdk.APITimeoutError, sdk.APIConnectionError) as e:
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        except Exception as e:  # anything else in one response is this request's error, never the run's
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        model = meta.pop("model")
        return Completion(text=text, latency_s=time.perf_counter() - t0, model=model or self.model, started=started,
                          data=data if req.extra_body else None, **meta)

    def _sdk(self):
        """The provider's SDK module (its ``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``)."""
        raise NotImplementedError

    async def _post(self, client, kw) -> str:
        """POST one request; the raw response body."""
        raise NotImplementedError

    def _parse(self, data) -> tuple:
        """``(text, meta)`` of a response body (raises :class:`MalformedResponse`)."""
        raise NotImplementedError

    def _retry_wait(self, headers) -> float | None:
        """Seconds the server asks to wait before a retry (``retry-after``)."""
        return parse_retry_after(headers.get("retry-after")) if headers is not None else None

    def adapt(self, c: Completion, kw: dict) -> bool:
        """Whether the failed request ``c`` (sent with ``kw``) should be sent again with changed parameters."""
        return False

    # -- many requests, with retries (direct use; the collectors use moralkit.collect.runner) --
    def generate(self, requests):
        """Answer ``requests`` (same order), ``concurrency`` at a time, each retried up to ``max_retries``
        times (:func:`retry_delay`). Works inside a running event loop."""
        requests = list(requests)
        if not requests:
            return []
        return run_sync(self._run(requests))

    async def _run(self, requests):
        sem = asyncio.Semaphore(self.concurrency)
        async with self.open_session() as session:
            return list(await asyncio.gather(*(self._with_retries(session, sem, r) for r in requests)))

    async def _with_retries(self, session, sem, req):
        async with sem:
            for k in range(self.max_retries + 1):
                c = await session.complete(req)
                if c.error is None or c.fatal:
                    return c
                if k < self.max_retries:
                    await asyncio.sleep(retry_delay(k, c.retry_after, self.backoff))
        c.error = f"gave up after {self.max_retries + 1} tries: {c.error}"
        return c



def short_error(e, redact=None, n=300) -> str:
    """An error's text, secrets redacted *before* it is cut to ``n`` characters."""
    s = redact(str(e)) if redact is not None else str(e)
    return s if len(s) <= n else s[:n] + "..."

