"""Backends: chat messages in, text out, with sampling parameters and a seed.

Two backends share one small interface, :class:`Backend`:

- :class:`TransformersBackend`: a local Hugging Face model (hub id, local
  directory, a ``.gguf`` file, or a name from :mod:`moralkit.collect.localmodels`),
  its chat template, batched generation with left padding, CUDA when present
  (else CPU in bfloat16), ``torch.manual_seed`` before every batch.
- :class:`OpenAIBackend`: the official ``openai`` client against the OpenAI API
  or any OpenAI-compatible server (``base_url``: vLLM, llama.cpp's server,
  Ollama, gateways, :mod:`moralkit.collect.server`). The key is read from an
  environment variable and never logged or written. Retries with exponential
  backoff on rate limits, timeouts and server errors; ``concurrency`` requests
  in flight (asyncio); a requests-per-minute cap.

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
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Sampling", "Request", "Completion", "Backend", "TransformersBackend", "OpenAIBackend",
           "make_backend", "BACKENDS", "retry_delay", "parse_retry_after", "run_sync", "completion_from_json",
           "MalformedResponse", "FATAL_STATUS"]


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of a request.

    ``temperature=0`` means greedy decoding. ``top_p=1`` and ``top_k=None``
    disable nucleus and top-k truncation (pure sampling at ``temperature``, as
    the APIs do by default).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 16

    def __post_init__(self):
        if not (0 <= self.temperature < float("inf")):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be None or >= 0, got {self.top_k}")
        if int(self.max_tokens) < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    def to_dict(self) -> dict:
        return asdict(self)


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
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
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
            raise ValueError(f"dtype must be 'bfloat16', 'float16' or 'float32', got {dtype!r}")
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
            from ..errors import MoralkitError

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
            raise ValueError(
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
    """At most ``rpm`` request starts in any ``window``-second window (async; default one minute)."""

    def __init__(self, rpm, window=60.0):
        self.rpm = rpm
        self.window = float(window)
        self.starts: list[float] = []
        self.lock = asyncio.Lock()

    async def wait(self):
        if not self.rpm:
            return
        async with self.lock:
            while True:
                now = time.monotonic()
                self.starts = [t for t in self.starts if now - t < self.window]
                if len(self.starts) < self.rpm:
                    self.starts.append(now)
                    return
                await asyncio.sleep(self.window - (now - self.starts[0]) + 1e-3)


#: HTTP statuses that no retry can fix: wrong key, no access, unknown model or endpoint.
FATAL_STATUS = (401, 403, 404)


class MalformedResponse(Exception):
    """A 200 response that is not a usable chat completion (bad JSON, HTML, no choices, null content)."""


def completion_from_json(data) -> tuple[str, dict]:
    """The text and metadata of a chat-completion body, or :class:`MalformedResponse` saying what is wrong.

    Empty ``choices``, a choice without a message and ``content: null`` are malformed (a transport
    failure to retry), not an empty answer.

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
    text = c0["message"].get("content")
    if not isinstance(text, str):
        raise MalformedResponse(f"the message content is {'null' if text is None else type(text).__name__}, "
                                "not a string")
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}

    def _int(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    fr = c0.get("finish_reason")
    model = data.get("model")
    return text, dict(prompt_tokens=_int(u.get("prompt_tokens")), completion_tokens=_int(u.get("completion_tokens")),
                      finish_reason=fr if isinstance(fr, str) else None, model=model if isinstance(model, str) else None)


class OpenAIBackend(Backend):
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
        connections, malformed responses and other 4xx (401, 403 and 404 stop at once), with
        :func:`retry_delay` (exponential backoff with jitter, ``Retry-After`` honoured).
    timeout : float, default 60
        Seconds per request.
    backoff : float, default 1
        Base of the exponential backoff, in seconds.
    send_seed : bool, default True
        Send ``seed`` (honoured by OpenAI and most local servers).
    label : str, optional
        Model label recorded with each answer (default ``model``).

    Notes
    -----
    Works inside a running event loop (Jupyter): :func:`run_sync` runs the requests on a worker
    thread's loop there.
    """

    name = "openai"

    def __init__(self, model, base_url=None, api_key_env="OPENAI_API_KEY", concurrency=4, rpm=None,
                 max_retries=6, timeout=60.0, backoff=1.0, send_seed=True, label=None):
        import openai

        from .secrets import Redactor, check_base_url, check_env_name

        if not model:
            raise ValueError("model must be a non-empty model name")
        if int(concurrency) < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if rpm is not None and int(rpm) < 1:
            raise ValueError(f"rpm must be None or >= 1, got {rpm}")
        if int(max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if not float(timeout) > 0 or not float(backoff) >= 0:
            raise ValueError(f"timeout must be > 0 and backoff >= 0, got {timeout}, {backoff}")
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
        self.send_seed = bool(send_seed)
        self.rate_window = 60.0
        if not os.environ.get(api_key_env) and base_url is None:
            raise ValueError(
                f"no API key: set the environment variable {api_key_env} (or pass base_url for a local server)"
            )
        self._openai = openai
        self._version = openai.__version__
        self._redact = Redactor(self.secrets())  # error texts are redacted before they are cut
        self._limiter = None

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

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "remote_model": self.remote_model,
                "base_url": self.base_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "rpm": self.rpm, "max_retries": self.max_retries, "timeout": self.timeout,
                "openai": self._version}

    def _client(self):
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return self._openai.AsyncOpenAI(api_key=key, base_url=self._base_url, timeout=self.timeout, max_retries=0)

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

    async def acomplete(self, client, req) -> Completion:
        """Send one request once. Never raises: any failure is a :class:`Completion` with ``error`` set
        (and ``retry_after``, ``status_code``, ``fatal`` when known)."""
        o = self._openai
        s = req.sampling
        kw = dict(model=self.remote_model, messages=list(req.messages), temperature=float(s.temperature),
                  top_p=float(s.top_p), max_tokens=int(s.max_tokens))
        if self.send_seed:
            kw["seed"] = int(req.seed)
        if req.extra_body:
            kw["extra_body"] = dict(req.extra_body)
        if self._limiter is not None:
            await self._limiter.wait()
        started = time.time()
        t0 = time.perf_counter()

        def fail(msg, **kw2):
            return Completion(text=None, error=msg, model=self.model, latency_s=time.perf_counter() - t0,
                              started=started, **kw2)

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
            return fail(f"MalformedResponse: {_short(e, self._redact)}", status_code=200)
        except o.APIStatusError as e:
            code = getattr(e, "status_code", None)
            ra = parse_retry_after(e.response.headers.get("retry-after")) if getattr(e, "response", None) is not None \
                else None
            return fail(f"HTTP {code} {type(e).__name__}: {_short(e, self._redact)}", status_code=code, retry_after=ra,
                        fatal=code in FATAL_STATUS)
        except (o.APITimeoutError, o.APIConnectionError) as e:
            return fail(f"{type(e).__name__}: {_short(e, self._redact)}")
        except Exception as e:  # anything else in one response is this request's error, never the run's
            return fail(f"{type(e).__name__}: {_short(e, self._redact)}")
        return Completion(text=text, prompt_tokens=meta["prompt_tokens"], completion_tokens=meta["completion_tokens"],
                          latency_s=time.perf_counter() - t0, finish_reason=meta["finish_reason"],
                          model=meta["model"] or self.model, started=started,
                          data=data if req.extra_body else None)

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


def _short(e, redact=None, n=300) -> str:
    """An error's text, secrets redacted *before* it is cut to ``n`` characters."""
    s = redact(str(e)) if redact is not None else str(e)
    return s if len(s) <= n else s[:n] + "..."


BACKENDS = {"transformers": TransformersBackend, "openai": OpenAIBackend}


def make_backend(kind: str, model, **kwargs) -> Backend:
    """Build a backend: ``make_backend("transformers", "qwen2.5-coder-0.5b-instruct")``,
    ``make_backend("openai", "gpt-4o-mini")``, ``make_backend("openai", "m", base_url="http://127.0.0.1:8000/v1")``."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend {kind!r}; choose one of {sorted(BACKENDS)}")
    return BACKENDS[kind](model, **kwargs)
