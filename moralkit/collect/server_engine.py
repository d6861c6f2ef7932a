"""The model behind ``moralkit serve``: generation with stop checks and OpenAI-shaped log-probabilities.

An *engine* is what the HTTP handler of :mod:`moralkit.collect.server` calls: ``model`` (its name),
``context_length`` (or ``None``), ``count_tokens(messages)``, ``prompt_logprobs(messages, ...)`` (vLLM's
prompt scoring) and ``generate(messages, sampling, seed, top_logprobs, should_stop)``, which returns a
:class:`GenerationResult`. :class:`TransformersEngine` is the engine of a loaded
:class:`~moralkit.collect.backends.TransformersBackend`; tests and benchmarks pass doubles with the same
interface (:func:`as_engine`). Everything here is also importable from :mod:`moralkit.collect.server`.

References
----------
OpenAI API reference, "Create chat completion": the response's ``choices[i].logprobs.content``, a list of
``ChatCompletionTokenLogprob`` ``{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}``
(https://platform.openai.com/docs/api-reference/chat/create and /chat/object; the OpenAPI schema as
mirrored at https://docs.rs/openai-struct/latest/openai_struct/models/struct.ChatCompletionTokenLogprob.html).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .backends import Sampling

__all__ = ["GenerationResult", "TransformersEngine", "as_engine"]


@dataclass
class GenerationResult:
    """What an engine returns for one generation."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    #: OpenAI's ``logprobs.content`` list, when log-probabilities were asked for
    logprobs: list | None = None
    stopped: bool = False


class TransformersEngine:
    """Generation for the server from a loaded :class:`~moralkit.collect.backends.TransformersBackend`.

    The same generation call as the backend's (``torch.manual_seed(seed)``, then ``generate`` with the same
    sampling arguments, so a request answers as the backend with ``batch_size=1`` would), plus a stopping
    criterion polled after every token (client gone, time out) and, when asked, the raw log-probabilities
    of each generated position (``output_logits``: the model's own distribution, before temperature and
    top-p).
    """

    def __init__(self, backend):
        self.backend = backend
        self.model = backend.model
        cfg = getattr(backend.lm, "config", None)
        self.context_length = getattr(cfg, "max_position_embeddings", None)

    def count_tokens(self, messages) -> int:
        return self.backend.count_tokens(messages)

    def prompt_logprobs(self, messages, add_generation_prompt=True, skip_special_tokens=True):
        return self.backend.prompt_logprobs(messages, add_generation_prompt=add_generation_prompt,
                                            skip_special_tokens=skip_special_tokens)

    def _token_entry(self, tok_id, lp):
        t = self.backend.tokenizer.decode([int(tok_id)], skip_special_tokens=False)
        return {"token": t, "logprob": float(lp), "bytes": None if "\ufffd" in t else list(t.encode("utf-8"))}

    def generate(self, messages, sampling: Sampling, seed: int, top_logprobs, should_stop) -> GenerationResult:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        b = self.backend
        tok = b.tokenizer
        stopped = []

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                flag = bool(should_stop())
                if flag:
                    stopped.append(True)
                return torch.full((input_ids.shape[0],), flag, dtype=torch.bool, device=input_ids.device)

        enc = tok([b.chat_text(messages)], return_tensors="pt", add_special_tokens=False).to(b.device)
        kw = dict(max_new_tokens=int(sampling.max_tokens), pad_token_id=tok.pad_token_id,
                  stopping_criteria=StoppingCriteriaList([_Stop()]))
        if sampling.temperature > 0:
            kw.update(do_sample=True, temperature=float(sampling.temperature), top_p=float(sampling.top_p),
                      top_k=int(sampling.top_k or 0))
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if top_logprobs is not None:
            kw.update(return_dict_in_generate=True, output_logits=True)
        with getattr(b, "_lock", None) or contextlib.nullcontext():
            torch.manual_seed(int(seed))
            with torch.inference_mode():
                out = b.lm.generate(**enc, **kw)
        seqs = out.sequences if top_logprobs is not None else out
        n_prompt = int(enc["input_ids"].shape[1])
        ids = seqs[0, n_prompt:].tolist()
        eos = _eos_ids(b)
        n, finish = len(ids), "length"
        for pos, t in enumerate(ids):
            if t in eos or t == tok.pad_token_id:
                n, finish = pos, "stop"
                break
        content = None
        if top_logprobs is not None:
            # one entry per generated position, the end-of-turn token included when it was generated (as vLLM
            # does): with max_tokens=1 the first position's distribution is returned even when it is the end
            content = []
            for pos in range(min(len(ids), n + 1, len(out.logits))):
                logp = torch.log_softmax(out.logits[pos][0].float(), dim=-1)
                e = self._token_entry(ids[pos], logp[ids[pos]])
                if top_logprobs:
                    vals, idx = torch.topk(logp, int(top_logprobs))
                    e["top_logprobs"] = [self._token_entry(i, v) for v, i in zip(vals.tolist(), idx.tolist())]
                else:
                    e["top_logprobs"] = []
                content.append(e)
        text = tok.decode(ids[:n], skip_special_tokens=True)
        # a generation that ended on its own at the step the stop check fired (end of turn, or max_tokens
        # reached) is complete: it is answered, not discarded
        complete = finish == "stop" or len(ids) >= int(sampling.max_tokens)
        return GenerationResult(text=text, finish_reason=finish, prompt_tokens=n_prompt, completion_tokens=n,
                                logprobs=content, stopped=bool(stopped) and not complete)


def _eos_ids(backend) -> set:
    ids = backend.lm.generation_config.eos_token_id
    if ids is None:
        ids = backend.tokenizer.eos_token_id
    return set(ids if isinstance(ids, (list, tuple)) else [ids])


def as_engine(backend):
    """The engine the server calls for ``backend``: a :class:`TransformersEngine` around a loaded
    :class:`~moralkit.collect.backends.TransformersBackend`, else ``backend`` itself (an object with the
    engine interface, e.g. a test double), or ``None`` (no model yet)."""
    if getattr(backend, "name", None) == "transformers":
        return TransformersEngine(backend)
    return backend  # a test double implementing the engine interface
