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
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Sampling", "Request", "Completion", "Backend", "TransformersBackend", "OpenAIBackend",
           "make_backend", "BACKENDS"]


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
        if not (self.temperature >= 0):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
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
    """One chat request: ``messages`` (``[{"role": ..., "content": ...}]``) and a seed."""

    messages: tuple
    seed: int = 0
    sampling: Sampling = field(default_factory=Sampling)

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


class Backend:
    """Base class: ``generate(requests) -> completions`` (same order).

    Subclasses set ``name`` (backend kind), ``model`` (label as recorded) and
    implement :meth:`generate`. :meth:`info` returns provenance for the manifest.
    """

    name = "base"
    model = ""
    #: how many requests to pass to one :meth:`generate` call for best throughput
    batch_size = 1

    def generate(self, requests: list[Request]) -> list[Completion]:  # pragma: no cover - abstract
        raise NotImplementedError

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model}

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
        self.tokenizer = AutoTokenizer.from_pretrained(src, **kw)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.lm = AutoModelForCausalLM.from_pretrained(src, dtype=td, **mkw).to(self.device)
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


class OpenAIBackend(Backend):
    """Chat completions through the official ``openai`` client (async).

    Parameters
    ----------
    model : str
        Model name as the server knows it.
    base_url : str, optional
        An OpenAI-compatible endpoint (e.g. ``http://127.0.0.1:8000/v1``); default the OpenAI API.
    api_key_env : str, default "OPENAI_API_KEY"
        Name of the environment variable holding the key. The key itself is
        never stored on the object, logged or written. When the variable is unset
        and ``base_url`` is given, the placeholder key ``"EMPTY"`` is sent (local servers).
    concurrency : int, default 4
        Requests in flight.
    rpm : int, optional
        Requests-per-minute cap.
    max_retries : int, default 6
        Retries of a request on rate limits (429), server errors (5xx), timeouts
        and connection errors, with exponential backoff (``backoff * 2**k`` s, capped at 60 s).
    timeout : float, default 60
        Seconds per request.
    send_seed : bool, default True
        Send ``seed`` (honoured by OpenAI and most local servers).
    label : str, optional
        Model label recorded with each answer (default ``model``).
    """

    name = "openai"

    def __init__(self, model, base_url=None, api_key_env="OPENAI_API_KEY", concurrency=4, rpm=None,
                 max_retries=6, timeout=60.0, backoff=1.0, send_seed=True, label=None):
        import openai

        if not model:
            raise ValueError("model must be a non-empty model name")
        if int(concurrency) < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if rpm is not None and int(rpm) < 1:
            raise ValueError(f"rpm must be None or >= 1, got {rpm}")
        self.remote_model = str(model)
        self.model = label or str(model)
        self.base_url = base_url
        self.api_key_env = api_key_env
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

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "remote_model": self.remote_model,
                "base_url": self.base_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "rpm": self.rpm, "max_retries": self.max_retries, "timeout": self.timeout,
                "openai": self._version}

    def _client(self):
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return self._openai.AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

    def generate(self, requests):
        requests = list(requests)
        if not requests:
            return []
        return asyncio.run(self._run(requests))

    async def _run(self, requests):
        client = self._client()
        sem = asyncio.Semaphore(self.concurrency)
        limiter = _RateLimiter(self.rpm, self.rate_window)
        try:
            return await asyncio.gather(*(self._one(client, sem, limiter, r) for r in requests))
        finally:
            await client.close()

    async def _one(self, client, sem, limiter, req):
        o = self._openai
        retryable = (o.RateLimitError, o.APITimeoutError, o.APIConnectionError, o.InternalServerError)
        s = req.sampling
        kw = dict(model=self.remote_model, messages=list(req.messages), temperature=float(s.temperature),
                  top_p=float(s.top_p), max_tokens=int(s.max_tokens))
        if self.send_seed:
            kw["seed"] = int(req.seed)
        err = None
        async with sem:
            for k in range(self.max_retries + 1):
                await limiter.wait()
                started = time.time()
                t0 = time.perf_counter()
                try:
                    r = await client.chat.completions.create(**kw)
                except retryable as e:
                    err = f"{type(e).__name__}: {_short(e)}"
                    if k < self.max_retries:
                        await asyncio.sleep(min(60.0, self.backoff * 2 ** k))
                    continue
                except o.APIStatusError as e:  # 4xx other than 429: not retried
                    return Completion(text=None, error=f"{type(e).__name__}: {_short(e)}", model=self.model,
                                      latency_s=time.perf_counter() - t0, started=started)
                ch = r.choices[0] if r.choices else None
                u = r.usage
                return Completion(
                    text=(ch.message.content if ch is not None else None) or "",
                    prompt_tokens=getattr(u, "prompt_tokens", None), completion_tokens=getattr(u, "completion_tokens", None),
                    latency_s=time.perf_counter() - t0, finish_reason=getattr(ch, "finish_reason", None),
                    model=getattr(r, "model", None) or self.model, started=started)
        return Completion(text=None, error=f"gave up after {self.max_retries + 1} tries: {err}", model=self.model,
                          started=time.time())


def _short(e, n=300) -> str:
    s = str(e)
    return s if len(s) <= n else s[:n] + "..."


BACKENDS = {"transformers": TransformersBackend, "openai": OpenAIBackend}


def make_backend(kind: str, model, **kwargs) -> Backend:
    """Build a backend: ``make_backend("transformers", "qwen2.5-coder-0.5b-instruct")``,
    ``make_backend("openai", "gpt-4o-mini")``, ``make_backend("openai", "m", base_url="http://127.0.0.1:8000/v1")``."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend {kind!r}; choose one of {sorted(BACKENDS)}")
    return BACKENDS[kind](model, **kwargs)
