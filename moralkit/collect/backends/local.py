"""A local Hugging Face model as a backend (:class:`TransformersBackend`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ...checks import check_choice, check_int
from ...errors import MoralkitError
from .base import Backend, Completion, Sampling


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

        from ..localmodels import LOCAL_MODELS, is_local_model_name, local_model_path

        self.batch_size = check_int(batch_size, "batch_size", minimum=1)
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
        td = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
        td = td[check_choice(str(dtype), tuple(td), "dtype")]
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


