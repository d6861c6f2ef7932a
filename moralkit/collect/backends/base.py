"""The backends' shared vocabulary: :class:`Sampling`, :class:`Request`, :class:`Completion`, the
:class:`Backend` interface, retry timing, running a coroutine from synchronous code, and reading a
chat-completion or Messages body (:func:`completion_from_json`, :func:`anthropic_completion_from_json`).

References
----------
Seror (2025), Section 2.1; Scherrer et al. (2023), Section 3.3.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
from dataclasses import asdict, dataclass, field

from ...checks import check_int
from ...errors import MoralkitError


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of a request.

    ``temperature=0`` means greedy decoding. ``top_p=1`` and ``top_k=None``
    disable nucleus and top-k truncation (pure sampling at ``temperature``, as
    the APIs do by default). ``max_tokens`` is the output budget (hidden reasoning
    included, for reasoning models). ``reasoning_effort`` (``None``: the model's
    default) is sent to reasoning models as is (OpenAI documents ``none``, ``minimal``,
    ``low``, ``medium``, ``high``, ``xhigh``; models accept subsets).

    :meth:`to_dict` omits ``reasoning_effort`` when it is ``None``, so the sampling of a run
    recorded before it existed is the same run.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 16
    reasoning_effort: str | None = None

    def __post_init__(self):
        if not (0 <= self.temperature < float("inf")):
            raise MoralkitError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not (0 < self.top_p <= 1):
            raise MoralkitError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None:
            check_int(self.top_k, "top_k", minimum=0)
        check_int(self.max_tokens, "max_tokens", minimum=1)
        if self.reasoning_effort is not None and not re.fullmatch(r"[a-z_]{1,20}", str(self.reasoning_effort)):
            raise MoralkitError(f"reasoning_effort must be a word such as 'low', 'medium' or 'high', "
                             f"got {self.reasoning_effort!r}")

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["reasoning_effort"] is None:
            del d["reasoning_effort"]
        return d


@dataclass(frozen=True)
class Request:
    """One chat request: ``messages`` (``[{"role": ..., "content": ...}]``) and a seed.

    ``extra_body`` (OpenAI-compatible servers only) adds fields the official API does not have, e.g.
    vLLM's ``prompt_logprobs``; the response's JSON is then kept in :attr:`Completion.data`.
    """

    messages: tuple
    seed: int = 0
    sampling: Sampling = field(default_factory=Sampling)
    extra_body: dict | None = field(default=None, compare=False, hash=False)

    @staticmethod
    def from_prompt(prompt: str, system: str | None = None, seed: int = 0, sampling: Sampling | None = None):
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return Request(messages=tuple(msgs), seed=int(seed), sampling=sampling or Sampling())


@dataclass
class Completion:
    """A backend's answer to one request (``error`` set and ``text`` None if it failed)."""

    text: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    model: str | None = None
    error: str | None = None
    started: float = 0.0
    #: HTTP status of a failed request, when there was one
    status_code: int | None = None
    #: seconds the server asked to wait (``Retry-After``)
    retry_after: float | None = None
    #: True when retrying cannot help (wrong key, unknown model): the run stops
    fatal: bool = False
    #: the response's JSON, kept when the request had ``extra_body``
    data: dict | None = None
    #: OpenAI's ``system_fingerprint`` (the backend configuration; seeded answers repeat only while it does)
    system_fingerprint: str | None = None
    #: the provider's id of the response (OpenAI ``chatcmpl-...``, Anthropic ``msg_...``)
    response_id: str | None = None
    #: hidden reasoning tokens (``usage.completion_tokens_details.reasoning_tokens``), within ``completion_tokens``
    reasoning_tokens: int | None = None


class Backend:
    """Base class: ``generate(requests) -> completions`` (same order).

    Subclasses set ``name`` (backend kind), ``model`` (label as recorded) and
    implement :meth:`generate`. :meth:`info` returns provenance for the manifest.

    The collectors (:mod:`moralkit.collect.runner`) drive a backend in one of two ways:

    - a backend with ``open_session()`` (an async context manager whose ``complete(request)``
      sends one request once, like :class:`OpenAIBackend`) runs as a pool: ``concurrency``
      requests in flight at all times, each record written as its response arrives;
    - any other backend gets :meth:`generate` calls of up to ``batch_size`` requests
      (local models batch their forward passes).

    A failed request is a :class:`Completion` with ``error`` set; the runner records it and
    retries up to ``max_retries`` times, waiting :func:`retry_delay` (base ``backoff`` seconds).
    """

    name = "base"
    model = ""
    #: how many requests to pass to one :meth:`generate` call for best throughput
    batch_size = 1
    #: requests in flight (pool backends)
    concurrency = 1
    #: failed tries of one request before the runner gives up on it for this session
    max_retries = 6
    #: base of the exponential backoff between retries, in seconds
    backoff = 1.0

    def generate(self, requests: list[Request]) -> list[Completion]:  # pragma: no cover - abstract
        raise NotImplementedError

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model}

    def secrets(self) -> list[str]:
        """Values that must never be written or printed (API keys, URL credentials)."""
        return []

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- retries, event loops


def retry_delay(k: int, retry_after: float | None = None, base: float = 1.0, cap: float = 60.0,
                max_retry_after: float = 300.0, rng=None) -> float:
    """Seconds to wait before retry ``k`` (0-based): exponential backoff with jitter, or ``Retry-After``.

    The backoff is ``base * 2**k`` capped at ``cap``, multiplied by a uniform factor in [0.5, 1]
    ("equal jitter"), so that clients that failed together do not retry together. A server's
    ``Retry-After`` is honoured when it asks for longer (up to ``max_retry_after`` seconds). Jitter
    changes only *when* a request is re-sent, never its seed or prompt.

    Examples
    --------
    >>> import random
    >>> 0.5 <= retry_delay(0, rng=random.Random(0)) <= 1.0
    True
    >>> retry_delay(0, retry_after=7.0, rng=random.Random(0))
    7.0
    """
    rng = rng or random
    d = min(float(cap), float(base) * 2 ** int(k)) * rng.uniform(0.5, 1.0)
    if retry_after is not None and retry_after > d:
        d = min(float(retry_after), float(max_retry_after))
    return d


def parse_retry_after(value) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        import datetime as _dt
        from email.utils import parsedate_to_datetime

        t = parsedate_to_datetime(value)
        return max(0.0, (t - _dt.datetime.now(_dt.timezone.utc)).total_seconds())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def run_sync(coro):
    """Run a coroutine to completion from synchronous code, also inside a running event loop.

    ``asyncio.run`` refuses to start inside a running loop (Jupyter, IPython); there the coroutine
    runs in a fresh loop on a worker thread, and this call blocks until it is done.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="moralkit-async", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


#: HTTP statuses that no retry can fix: a request the server refuses (400, 422: the message names the parameter
#: and the flag), a wrong key or no access (401, 403), an unknown model or endpoint (404).
FATAL_STATUS = (400, 401, 403, 404, 422)

#: ``finish_reason`` values that mean "the output budget ran out" (OpenAI ``length``, Anthropic ``max_tokens``).
LENGTH_REASONS = ("length", "max_tokens")


def check_sampling(backend, sampling) -> None:
    """Raise :class:`~moralkit.errors.MoralkitError` if ``backend`` cannot send ``sampling`` (before any request)."""
    check = getattr(backend, "check_sampling", None)
    if check is not None and sampling is not None:
        check(sampling)


def merge_request_logs(old, new) -> list:
    """One log of parameter sets sent (``[{"params": {...}, "requests": n}]``) from two."""
    out = {json.dumps(e["params"], sort_keys=True): dict(e) for e in (old or [])}
    for e in new or []:
        k = json.dumps(e["params"], sort_keys=True)
        if k in out:
            out[k]["requests"] += e["requests"]
        else:
            out[k] = dict(e)
    return list(out.values())


class MalformedResponse(Exception):
    """A 200 response that is not a usable chat completion (bad JSON, HTML, no choices, null content)."""


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v):
    return v if isinstance(v, str) else None


def completion_from_json(data) -> tuple[str, dict]:
    """The text and metadata of a chat-completion body, or :class:`MalformedResponse` saying what is wrong.

    Empty ``choices``, a choice without a message and ``content: null`` are malformed (a transport
    failure to retry), not an empty answer, unless ``finish_reason`` is ``"length"``: then the output
    budget ran out before any text (a reasoning model), and the text is ``""``. The metadata has the
    token counts (with ``reasoning_tokens``), ``finish_reason``, ``model``, ``system_fingerprint`` and the
    response ``id``.

    Examples
    --------
    >>> completion_from_json({"choices": [{"message": {"content": "Option 3"}, "finish_reason": "stop"}]})[0]
    'Option 3'
    """
    if not isinstance(data, dict):
        raise MalformedResponse(f"the body is a JSON {type(data).__name__}, not an object")
    ch = data.get("choices")
    if not isinstance(ch, list):
        raise MalformedResponse(f"'choices' is {type(ch).__name__}, not a list")
    if not ch:
        raise MalformedResponse("'choices' is empty")
    c0 = ch[0]
    if not isinstance(c0, dict) or not isinstance(c0.get("message"), dict):
        raise MalformedResponse("the first choice has no 'message' object")
    fr = _str(c0.get("finish_reason"))
    text = c0["message"].get("content")
    if text is None and fr == "length":
        text = ""
    if not isinstance(text, str):
        raise MalformedResponse(f"the message content is {'null' if text is None else type(text).__name__}, "
                                "not a string")
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    det = u.get("completion_tokens_details") if isinstance(u.get("completion_tokens_details"), dict) else {}
    return text, dict(prompt_tokens=_int(u.get("prompt_tokens")), completion_tokens=_int(u.get("completion_tokens")),
                      reasoning_tokens=_int(det.get("reasoning_tokens")), finish_reason=fr,
                      model=_str(data.get("model")), system_fingerprint=_str(data.get("system_fingerprint")),
                      response_id=_str(data.get("id")))


def anthropic_completion_from_json(data) -> tuple[str, dict]:
    """The text and metadata of an Anthropic Messages API body, or :class:`MalformedResponse`.

    The text is the concatenation of the ``text`` blocks (``""`` when there is none, e.g. the budget went
    to a thinking block: ``stop_reason`` ``"max_tokens"``). ``finish_reason`` is Anthropic's ``stop_reason``
    as sent (``end_turn``, ``max_tokens``, ``stop_sequence``, ``refusal``, ...). Anthropic has no
    fingerprint; the response ``id`` and ``model`` are what identifies an answer
    (https://docs.claude.com/en/api/messages).

    Examples
    --------
    >>> anthropic_completion_from_json({"type": "message", "id": "msg_1", "model": "claude-x",
    ...     "content": [{"type": "text", "text": "Option 3"}], "stop_reason": "end_turn",
    ...     "usage": {"input_tokens": 9, "output_tokens": 3}})[0]
    'Option 3'
    """
    if not isinstance(data, dict):
        raise MalformedResponse(f"the body is a JSON {type(data).__name__}, not an object")
    if data.get("type") != "message":
        raise MalformedResponse(f"the body's type is {data.get('type')!r}, not 'message'")
    content = data.get("content")
    if not isinstance(content, list):
        raise MalformedResponse(f"'content' is {type(content).__name__}, not a list")
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    if any(not isinstance(t, str) for t in texts):
        raise MalformedResponse("a text block has no string 'text'")
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return "".join(texts), dict(prompt_tokens=_int(u.get("input_tokens")), completion_tokens=_int(u.get("output_tokens")),
                                reasoning_tokens=None, finish_reason=_str(data.get("stop_reason")),
                                model=_str(data.get("model")), system_fingerprint=None,
                                response_id=_str(data.get("id")))


