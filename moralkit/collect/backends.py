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

import asyncio
import json
import os
import random
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import MoralkitError

__all__ = ["Sampling", "Request", "Completion", "Backend", "TransformersBackend", "APIBackend", "OpenAIBackend",
           "AnthropicBackend", "make_backend", "BACKENDS", "retry_delay", "parse_retry_after", "run_sync",
           "completion_from_json", "anthropic_completion_from_json", "MalformedResponse", "FATAL_STATUS",
           "LENGTH_REASONS", "is_reasoning_model", "REASONING_MAX_TOKENS", "survey_max_tokens", "check_sampling",
           "rejected_parameters", "PARAMETER_FLAGS", "merge_request_logs"]


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
        if self.top_k is not None and self.top_k < 0:
            raise MoralkitError(f"top_k must be None or >= 0, got {self.top_k}")
        if int(self.max_tokens) < 1:
            raise MoralkitError(f"max_tokens must be >= 1, got {self.max_tokens}")
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


# --------------------------------------------------------------------------- transformers


def _torch_device(device):
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


class TransformersBackend(Backend):
    """A local Hugging Face causal LM, loaded once.

    Parameters
    ----------
    model : str or path
        A registry name (:data:`moralkit.collect.localmodels.LOCAL_MODELS`), a
        ``.gguf`` file, a local model directory, or a hub id (needs internet or a
        populated HF cache).
    gguf_file : str, optional
        GGUF file name inside ``model`` (a directory or hub repo).
    device : {"auto", "cpu", "cuda", ...}
        ``"auto"`` picks CUDA when available.
    dtype : str, optional
        ``"bfloat16"`` (default; 2.4x faster than float32 on the test CPU),
        ``"float16"``, ``"float32"``.
    batch_size : int, default 4
        Requests per forward pass (left padding).
    threads : int, optional
        ``torch.set_num_threads`` (default: torch's choice).
    dequantize : bool, default True
        GGUF only: unpack the weights into dense ``dtype`` tensors at load time
        (``GgufConfig(dequantize=True)``), instead of keeping them packed with
        float32 kernels; dense bfloat16 was faster on the test CPU (see
        ``benchmarks/bench_backends.py``).
    label : str, optional
        Model label recorded with each answer (default: the registry name or the
        file / directory / hub id name).
    """

    name = "transformers"

    def __init__(self, model, gguf_file=None, device="auto", dtype="bfloat16", batch_size=4, label=None,
                 threads=None, dequantize=True):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .localmodels import LOCAL_MODELS, is_local_model_name, local_model_path

        if int(batch_size) < 1:
            raise MoralkitError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.source = str(model)
        self.upstream = None
        self.licence = None
        self.model_sha256 = None
        if is_local_model_name(model):
            spec = LOCAL_MODELS[str(model).lower()]
            path = local_model_path(spec.name)
            src, gguf_file = str(path.parent), path.name
            label = label or spec.name
            self.upstream, self.licence, self.model_sha256 = spec.upstream, spec.licence, spec.sha256
        elif str(model).endswith(".gguf") and Path(model).is_file():
            p = Path(model).resolve()
            src, gguf_file = str(p.parent), p.name
            label = label or p.stem
        else:
            src = str(model)
            label = label or (Path(src).name if Path(src).exists() else src)
        self.model = label
        self.gguf_file = gguf_file
        self.device = _torch_device(device)
        if threads:
            torch.set_num_threads(int(threads))
        td = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(str(dtype))
        if td is None:
            raise MoralkitError(f"dtype must be 'bfloat16', 'float16' or 'float32', got {dtype!r}")
        self.dtype = str(dtype)
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        self.dequantize = bool(dequantize) if gguf_file else None
        mkw = dict(kw)
        if gguf_file:
            from transformers import GgufConfig

            mkw["quantization_config"] = GgufConfig(gguf_file=gguf_file, dequantize=bool(dequantize))
        t0 = time.perf_counter()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(src, **kw)
            self.lm = AutoModelForCausalLM.from_pretrained(src, dtype=td, **mkw).to(self.device)
        except Exception as e:  # a missing model or a damaged file: one clear message, not a traceback

            what = f"{src}/{gguf_file}" if gguf_file else src
            raise MoralkitError(
                f"cannot load the model {what!r} ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}). "
                "Pass a name listed by `python -m moralkit models` (installed offline models), a local model "
                "directory, or a valid .gguf file; hub ids need a populated Hugging Face cache.") from e
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.lm.eval()
        self.load_seconds = time.perf_counter() - t0
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise MoralkitError(
                f"model {label!r} has no chat template: it is not an instruction-tuned chat model "
                "(pass an -Instruct/-chat model)"
            )
        self._versions = {"transformers": transformers.__version__, "torch": torch.__version__}
        self._lock = threading.Lock()

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "source": self.source, "gguf_file": self.gguf_file,
                "upstream": self.upstream, "licence": self.licence, "model_sha256": self.model_sha256,
                "device": self.device, "dtype": self.dtype, "dequantize": self.dequantize,
                "batch_size": self.batch_size,
                "load_seconds": round(self.load_seconds, 2), **self._versions}

    def check_sampling(self, s: Sampling) -> None:
        """A local model has no reasoning-effort setting: refuse one rather than ignore it."""

        if s.reasoning_effort is not None:
            raise MoralkitError("--reasoning-effort: local transformers models take none (it is sent to API "
                                "reasoning models only); drop it")

    def chat_text(self, messages) -> str:
        """The prompt string after the model's chat template (generation prompt added)."""
        return self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)

    def count_tokens(self, messages) -> int:
        return len(self.tokenizer(self.chat_text(messages), add_special_tokens=False)["input_ids"])

    def prompt_logprobs(self, messages, add_generation_prompt: bool = True, skip_special_tokens: bool = True):
        """Teacher-forced log-probabilities of the chat text of ``messages`` (what vLLM's ``prompt_logprobs`` returns).

        Returns
        -------
        list of (token_id, decoded_token, logprob)
            One per token of the rendered conversation; ``logprob`` is ``log p(token | tokens before it)``
            (``None`` for the first token), ``decoded_token`` its text (``""`` for a special token when
            ``skip_special_tokens``).
        """
        import torch

        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=bool(add_generation_prompt),
                                                  tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        with self._lock, torch.inference_mode():
            logits = self.lm(input_ids=torch.tensor([ids], dtype=torch.long, device=self.device)).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        out = [(int(ids[0]), self.tokenizer.decode([ids[0]], skip_special_tokens=skip_special_tokens), None)]
        for j in range(1, len(ids)):
            out.append((int(ids[j]), self.tokenizer.decode([ids[j]], skip_special_tokens=skip_special_tokens),
                        float(logp[j - 1, ids[j]])))
        return out

    def generate(self, requests):
        """Generate one answer per request, ``batch_size`` at a time.

        Requests in one batch must share their sampling parameters (they are
        split otherwise). Each forward batch is seeded with
        ``torch.manual_seed(seed of its first request)``: with ``batch_size=1``
        every answer depends only on its own request and seed.
        """
        out = []
        i = 0
        requests = list(requests)
        while i < len(requests):
            j = i + 1
            while j < len(requests) and j - i < self.batch_size and requests[j].sampling == requests[i].sampling:
                j += 1
            out.extend(self._generate_batch(requests[i:j]))
            i = j
        return out

    def _generate_batch(self, reqs):
        import torch

        s = reqs[0].sampling
        texts = [self.chat_text(r.messages) for r in reqs]
        with self._lock:
            started = time.time()
            t0 = time.perf_counter()
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            kw = dict(max_new_tokens=int(s.max_tokens), pad_token_id=self.tokenizer.pad_token_id)
            if s.temperature > 0:
                kw.update(do_sample=True, temperature=float(s.temperature), top_p=float(s.top_p),
                          top_k=int(s.top_k or 0))
            else:
                kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            torch.manual_seed(int(reqs[0].seed))
            with torch.inference_mode():
                gen = self.lm.generate(**enc, **kw)
            latency = time.perf_counter() - t0
        new = gen[:, enc["input_ids"].shape[1]:]
        eos = set(self._eos_ids())
        comps = []
        n_prompt = enc["attention_mask"].sum(dim=1).tolist()
        for k in range(len(reqs)):
            ids = new[k].tolist()
            n = len(ids)
            finish = "length"
            for pos, t in enumerate(ids):
                if t in eos or t == self.tokenizer.pad_token_id:
                    n, finish = pos, "stop"
                    break
            text = self.tokenizer.decode(ids[:n], skip_special_tokens=True)
            comps.append(Completion(text=text, prompt_tokens=int(n_prompt[k]), completion_tokens=n,
                                    latency_s=latency, finish_reason=finish, model=self.model, started=started))
        return comps

    def _eos_ids(self):
        ids = self.lm.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return ids if isinstance(ids, (list, tuple)) else [ids]


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


# --------------------------------------------------------------------------- openai


class _RateLimiter:
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


#: HTTP statuses that no retry can fix: a request the server refuses (400, 422: the message names the parameter
#: and the flag), a wrong key or no access (401, 403), an unknown model or endpoint (404).
FATAL_STATUS = (400, 401, 403, 404, 422)

#: ``finish_reason`` values that mean "the output budget ran out" (OpenAI ``length``, Anthropic ``max_tokens``).
LENGTH_REASONS = ("length", "max_tokens")

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


def check_sampling(backend, sampling) -> None:
    """Raise :class:`~moralkit.errors.MoralkitError` if ``backend`` cannot send ``sampling`` (before any request)."""
    check = getattr(backend, "check_sampling", None)
    if check is not None and sampling is not None:
        check(sampling)


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


class APIBackend(Backend):
    """What the API backends share: key handling, validation, the pool session, retries, the request log.

    Subclasses implement ``_client()`` (an async SDK client without its own retries), ``request_kwargs(req)``
    (the parameters of one request) and ``_send(client, kwargs)`` (one HTTP request, returning a
    :class:`Completion`); see :class:`OpenAIBackend` for the parameters.
    """

    default_key_env = "OPENAI_API_KEY"

    def __init__(self, model, base_url=None, api_key_env=None, concurrency=4, rpm=None, max_retries=6, timeout=60.0,
                 backoff=1.0, label=None):
        from .secrets import Redactor, check_base_url, check_env_name

        api_key_env = api_key_env or self.default_key_env
        if not model:
            raise MoralkitError("model must be a non-empty model name")
        if int(concurrency) < 1:
            raise MoralkitError(f"concurrency must be >= 1, got {concurrency}")
        if rpm is not None and int(rpm) < 1:
            raise MoralkitError(f"rpm must be None or >= 1, got {rpm}")
        if int(max_retries) < 0:
            raise MoralkitError(f"max_retries must be >= 0, got {max_retries}")
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
        from .secrets import strip_url

        return strip_url(self._base_url)

    def secrets(self) -> list[str]:
        """Values that must never be written or printed: the key and any credentials in ``base_url``."""
        from .secrets import url_secrets

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
                backend._limiter = _RateLimiter(backend.rpm, backend.rate_window)
                return self

            async def __aexit__(self, *exc):
                await self.client.close()

            async def complete(self, req):
                return await backend.acomplete(self.client, req)

        return _Session()

    def _short(self, e, n=300) -> str:
        """An error's text, secrets redacted before it is cut to ``n`` characters."""
        return _short(e, self._redact, n)

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
        if max_tokens_param not in ("auto", "max_tokens", "max_completion_tokens"):
            raise MoralkitError("max_tokens_param must be 'auto', 'max_tokens' or 'max_completion_tokens', "
                             f"got {max_tokens_param!r}")
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

    async def _send(self, client, kw, req, t0, started) -> Completion:
        o = self._openai
        try:
            raw = await client.chat.completions.with_raw_response.create(**kw)
            body = raw.text
            try:
                data = json.loads(body)
            except ValueError as e:
                raise MalformedResponse(f"the body is not JSON ({e}); it starts with "
                                        f"{self._redact(body)[:80]!r}") from None
            text, meta = completion_from_json(data)
        except MalformedResponse as e:
            return self._failure(f"MalformedResponse: {self._short(e)}", t0, started, status_code=200)
        except o.APIStatusError as e:
            resp = getattr(e, "response", None)
            ra = parse_retry_after(resp.headers.get("retry-after")) if resp is not None else None
            return self._status_failure(e, t0, started, ra)
        except (o.APITimeoutError, o.APIConnectionError) as e:
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        except Exception as e:  # anything else in one response is this request's error, never the run's
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        model = meta.pop("model")
        return Completion(text=text, latency_s=time.perf_counter() - t0, model=model or self.model, started=started,
                          data=data if req.extra_body else None, **meta)


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

    async def _send(self, client, kw, req, t0, started) -> Completion:
        a = self._anthropic
        try:
            raw = await client.messages.with_raw_response.create(**kw)
            body = raw.text
            if callable(body):  # the anthropic SDK's AsyncAPIResponse reads its body asynchronously
                body = await body()
            try:
                data = json.loads(body)
            except ValueError as e:
                raise MalformedResponse(f"the body is not JSON ({e}); it starts with "
                                        f"{self._redact(body)[:80]!r}") from None
            text, meta = anthropic_completion_from_json(data)
        except MalformedResponse as e:
            return self._failure(f"MalformedResponse: {self._short(e)}", t0, started, status_code=200)
        except a.APIStatusError as e:
            resp = getattr(e, "response", None)
            return self._status_failure(e, t0, started, _anthropic_wait(resp.headers if resp is not None else None))
        except (a.APITimeoutError, a.APIConnectionError) as e:
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        except Exception as e:  # anything else in one response is this request's error, never the run's
            return self._failure(f"{type(e).__name__}: {self._short(e)}", t0, started)
        model = meta.pop("model")
        return Completion(text=text, latency_s=time.perf_counter() - t0, model=model or self.model, started=started,
                          **meta)


def _short(e, redact=None, n=300) -> str:
    """An error's text, secrets redacted *before* it is cut to ``n`` characters."""
    s = redact(str(e)) if redact is not None else str(e)
    return s if len(s) <= n else s[:n] + "..."


BACKENDS = {"transformers": TransformersBackend, "openai": OpenAIBackend, "anthropic": AnthropicBackend}


def make_backend(kind: str, model, **kwargs) -> Backend:
    """Build a backend: ``make_backend("transformers", "qwen2.5-coder-0.5b-instruct")``,
    ``make_backend("openai", "gpt-4o-mini")``, ``make_backend("openai", "m", base_url="http://127.0.0.1:8000/v1")``,
    ``make_backend("anthropic", "claude-sonnet-4-5")``."""
    if kind not in BACKENDS:
        raise MoralkitError(f"unknown backend {kind!r}; choose one of {sorted(BACKENDS)}")
    return BACKENDS[kind](model, **kwargs)
