"""Score MoralChoice answers by teacher forcing: exact action likelihoods from a local model or a server.

For every scenario, the six question forms and their canonical answers
(:func:`moralkit.moralchoice.likelihood.canonical_answers`) are scored in **one
forward pass** of the model:

* the chat-template prefix of each template (system message = the template's
  instruction header, preceded by a persona's text if any, up to the start of
  the user's question) is computed **once per run** and kept as a key/value
  cache; the three prefixes sit side by side in one cache, each at positions
  ``0..L-1`` (rotary position embeddings are applied per token, so the layout
  in memory does not matter, only the mask);
* the rest of each form -- the question in its two orderings, the end of the
  user turn, the assistant header, and each canonical answer -- is laid out as
  a token **trie** (a prefix tree: the two orderings share the context, the
  answers share their first tokens), and every node attends to its template's
  cached prefix and to its ancestors only (a 4-D attention mask, "tree
  attention"); positions are the depth in the tree;
* the log-probability of an answer is the sum of its tokens' log-probabilities
  plus the log-probability of ending the turn after it (any of the model's
  end-of-sequence tokens, the ones that stop generation).

A model behind an OpenAI-compatible server that returns ``prompt_logprobs`` (vLLM's extension of the
chat API) is scored by :class:`PromptLogprobScorer` instead: one request per answer, the server's own
chat template. The OpenAI API does not score given text.

The result is exactly the product of the model's next-token probabilities
along each complete answer, as a plain forward pass over the whole
conversation would compute it (up to floating-point rounding; the tests check
the agreement with a direct full-sequence computation).

Records go to a run directory (``records.jsonl`` + ``manifest.json``,
:class:`~moralkit.collect.store.RecordStore`), so a run stopped at any point
resumes by re-running the same command:

* a local model (:class:`TreeScorer`) writes one record per scenario (one
  forward pass scores all its answers);
* a server (:class:`PromptLogprobScorer`) goes through the shared request
  runner (:func:`moralkit.collect.runner.run_tasks`), like the sampling
  collectors: one record per request as its response arrives (a ``head``
  request per question form, then one per answer), failed requests recorded as
  errors and re-sent with backoff (``Retry-After`` honoured), a request that has
  an answer never re-sent, and the same statuses (:func:`run_likelihood` raises
  :class:`~moralkit.collect.runner.CollectionIncompleteError` when requests
  remain, :class:`~moralkit.collect.runner.CollectionRefusedError` when the
  server refuses). A scenario enters the table once all its answers are scored;
  one failed request never discards the others.

The tidy table (:func:`likelihood_frame`, :func:`export_likelihood`) has one row
per model, scenario and question form.

References
----------
Scherrer et al. (2023), Definition 1 (eq. 1), Section 2.3, Section 3.3 (the
templates' instruction header, one question per fresh context, temperature 1:
the model's own distribution, no truncation), Appendix B.
"""

from __future__ import annotations

import inspect
import math
import re
import time
from pathlib import Path

import numpy as np

from ..errors import DataError, MoralkitError
from .runner import RunReport, Task, incomplete_error, run_tasks
from .store import RecordStore, git_commit, package_versions, read_records, session_info, utc_now

__all__ = ["TreeScorer", "PromptLogprobScorer", "make_scorer", "run_likelihood", "scoring_order", "scenario_items", "likelihood_frame", "export_likelihood", "persona_system",
           "LIKELIHOOD_IDENTITY"]

LIKELIHOOD_IDENTITY = ("survey", "label", "backend", "model", "ambiguity", "persona", "answers", "dtype", "estimator")

#: What a ``top_logprobs`` run adds to its identity (the alternatives asked for, the repeat form's samples, the seed).
TOP_LOGPROBS_IDENTITY = ("top_logprobs", "repeat_samples", "seed")

#: The estimators :func:`run_likelihood` collects with (``estimator`` column of the likelihood table).
LIKELIHOOD_ESTIMATORS = ("token_probability", "top_logprobs")

#: How :func:`run_likelihood` names its units in the completeness line.
LIKELIHOOD_LINE = {"tree": ("scenarios", "scored", "not scored"), "api": ("requests", "answered", "not usable")}

_SENTINEL = "\uE000MORALKIT-QUESTION\uE000"


def persona_system(header: str, persona: str = "none") -> str:
    """The system message of a MoralChoice form under a persona.

    ``none`` sends the template's instruction header alone (as
    :func:`moralkit.collect.run_moralchoice` does); any other persona puts its
    text first, then a blank line, then the header.

    Examples
    --------
    >>> persona_system("Answer rules: ...", "none")
    'Answer rules: ...'
    >>> persona_system("Answer rules: ...", "care").startswith("You follow the ethics of care.")
    True
    """
    from .personas import get_persona

    p = get_persona(persona)
    return header if p.system is None else f"{p.system}\n\n{header}"


class TreeScorer:
    """Log-probabilities of complete answers, scored by teacher forcing with shared prefixes.

    Parameters
    ----------
    backend : TransformersBackend
        A loaded local model (its tokenizer, chat template and weights are used).

    Notes
    -----
    :meth:`set_prefixes` computes the key/value cache of the shared prefixes once;
    :meth:`score` then scores any number of (prefix, continuation, answer)
    sequences in one forward pass.
    """

    def __init__(self, backend):
        import torch

        if getattr(backend, "name", None) != "transformers":
            raise MoralkitError("TreeScorer needs a local transformers backend (make_backend('transformers', ...)); "
                             "API backends do not return the probability of a given continuation.")
        self.backend = backend
        self.lm = backend.lm
        self.tok = backend.tokenizer
        self.torch = torch
        ids = backend.lm.generation_config.eos_token_id
        if ids is None:
            ids = self.tok.eos_token_id
        self.eos_ids = sorted({int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])})
        self.prefixes: dict = {}
        self._kv = None
        self.tokens_scored = 0
        self.forward_seconds = 0.0
        # transformers 5.24 renamed forward's ``past_key_values`` to ``cache`` (the old name is removed in 5.40)
        params = inspect.signature(self.lm.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    # ------------------------------------------------------------------ tokenisation
    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def split_chat(self, system: str | None, user: str) -> tuple[str, str]:
        """The chat text of (system, user) up to the user's content, and the rest (generation prompt included)."""
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": _SENTINEL}]
        text = self.backend.chat_text(msgs)
        if text.count(_SENTINEL) != 1:
            raise DataError("the chat template does not place the user's message verbatim; cannot split it")
        head, tail = text.split(_SENTINEL)
        return head, user + tail

    # ------------------------------------------------------------------ prefixes
    def set_prefixes(self, prefixes: dict) -> None:
        """Compute the key/value cache of named prefixes (texts), each at positions 0..L-1, in one pass."""
        torch = self.torch
        from transformers import DynamicCache

        names = list(prefixes)
        toks = [self.encode(prefixes[n]) for n in names]
        if any(len(t) == 0 for t in toks):
            raise MoralkitError("empty prefix")
        n = sum(len(t) for t in toks)
        mask = torch.zeros((n, n), dtype=torch.bool)
        pos, spans, start = [], {}, 0
        for name, t in zip(names, toks):
            L = len(t)
            mask[start:start + L, start:start + L] = torch.tril(torch.ones((L, L), dtype=torch.bool))
            spans[name] = (start, L)
            pos.extend(range(L))
            start += L
        ids = torch.tensor([sum(toks, [])], dtype=torch.long)
        cache = DynamicCache(config=self.lm.config)
        with torch.inference_mode():
            self.lm(input_ids=ids, attention_mask=self._mask4d(mask), position_ids=torch.tensor([pos]),
                    use_cache=True, logits_to_keep=1, **{self._cache_kw: cache})
        self._kv = [(layer.keys, layer.values) for layer in cache.layers]
        self.prefixes = {name: dict(span=spans[name], tokens=t) for name, t in zip(names, toks)}
        self._n_prefix = n

    def set_templates(self, systems: dict) -> None:
        """Use one system message per question type (e.g. :func:`persona_system` of each template's header):
        their chat prefixes become the cached prefixes, named by question type."""
        self.question_types = tuple(systems)
        self.systems = dict(systems)
        self.heads = {q: self.split_chat(self.systems[q], "x")[0] for q in self.question_types}
        self.set_prefixes(self.heads)

    def _mask4d(self, allowed):
        """Boolean "may attend" mask -> the additive float mask of the model's dtype, shape (1, 1, q, kv)."""
        torch = self.torch
        dt = self.lm.dtype
        m = torch.zeros(allowed.shape, dtype=dt)
        m.masked_fill_(~allowed, torch.finfo(dt).min)
        return m[None, None]

    # ------------------------------------------------------------------ scoring
    def score(self, items) -> list[float]:
        """Natural-log probability of each answer (followed by end of turn) after its prefix and continuation.

        Parameters
        ----------
        items : list of (prefix_name, continuation_tokens, answer_tokens)
            ``continuation_tokens`` (the rest of the prompt after the cached
            prefix) is conditioned on; ``answer_tokens`` are scored.

        Returns
        -------
        list of float
            log p(answer, eos | prefix, continuation).
        """
        torch = self.torch
        from transformers import DynamicCache

        if self._kv is None:
            raise MoralkitError("call set_prefixes() first")
        # build the trie: node key = (prefix_name, tuple of tokens so far)
        node_of: dict = {}
        parent, token, depth, root = [], [], [], []
        paths = []
        for name, cont, ans in items:
            if name not in self.prefixes:
                raise MoralkitError(f"unknown prefix {name!r}; known: {sorted(self.prefixes)}")
            if len(cont) == 0 or len(ans) == 0:
                raise MoralkitError("continuation and answer must each hold at least one token")
            seq = list(cont) + list(ans)
            nodes = []
            par = -1
            for k in range(len(seq)):
                key = (name, tuple(seq[:k + 1]))
                idx = node_of.get(key)
                if idx is None:
                    idx = len(token)
                    node_of[key] = idx
                    parent.append(par)
                    token.append(int(seq[k]))
                    depth.append(k)
                    root.append(name)
                par = idx
                nodes.append(idx)
            paths.append((nodes, len(cont), seq))
        N = len(token)
        P = self._n_prefix
        allowed = torch.zeros((N, P + N), dtype=torch.bool)
        par_np = np.asarray(parent)
        anc = np.zeros((N, N), dtype=bool)
        for i in range(N):  # parents come before children
            if par_np[i] >= 0:
                anc[i] = anc[par_np[i]]
            anc[i, i] = True
        allowed[:, P:] = torch.from_numpy(anc)
        pos = []
        for i in range(N):
            s, L = self.prefixes[root[i]]["span"]
            allowed[i, s:s + L] = True
            pos.append(L + depth[i])
        # rows whose next-token distribution is needed: the node before each answer token, and the last node
        need = sorted({nodes[j - 1] for nodes, c, _ in paths for j in range(c, len(nodes))} |
                      {nodes[-1] for nodes, _, _ in paths})
        row = {n: r for r, n in enumerate(need)}
        cache = DynamicCache(config=self.lm.config)
        for li, (k, v) in enumerate(self._kv):
            cache.update(k, v, li)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.lm(input_ids=torch.tensor([token], dtype=torch.long), attention_mask=self._mask4d(allowed),
                          position_ids=torch.tensor([pos], dtype=torch.long), use_cache=True,
                          logits_to_keep=torch.tensor(need, dtype=torch.long), **{self._cache_kw: cache})
            logp = torch.log_softmax(out.logits[0].float(), dim=-1)
            eos = torch.logsumexp(logp[:, self.eos_ids], dim=-1)
        self.forward_seconds += time.perf_counter() - t0
        self.tokens_scored += N
        res = []
        for nodes, c, seq in paths:
            lp = 0.0
            for j in range(c, len(nodes)):
                lp += float(logp[row[nodes[j - 1]], seq[j]])
            lp += float(eos[row[nodes[-1]]])
            res.append(lp)
        return res

    def context(self, q: str, user: str):
        """What the answers of one question form share (for :func:`scenario_items`): the tokens after the
        template's cached prefix."""
        head, rest = self.split_chat(self.systems[q], user)
        if head != self.heads[q]:
            raise DataError("the chat prefix depends on the question; cannot share it")
        return self.encode(rest)

    def item(self, q: str, context, answer: str):
        """One scoring item: (question type, continuation tokens, answer tokens)."""
        return (q, context, self.encode(answer))

    def record_fields(self) -> dict:
        """Fields this scorer adds to each scenario's record: none (the end-of-turn ids are in the manifest)."""
        return {}

    def direct_logprob(self, system: str | None, user: str, answer: str) -> float:
        """log p(answer, eos | chat) by one plain forward pass over the whole text (for checks)."""
        torch = self.torch
        head, rest = self.split_chat(system, user)
        prompt = self.encode(head) + self.encode(rest)
        ans = self.encode(answer)
        ids = torch.tensor([prompt + ans], dtype=torch.long)
        with torch.inference_mode():
            logits = self.lm(input_ids=ids).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        n = len(prompt)
        lp = sum(float(logp[n - 1 + j, t]) for j, t in enumerate(ans))
        return lp + float(torch.logsumexp(logp[n - 1 + len(ans), self.eos_ids], dim=-1))


class PromptLogprobScorer:
    """Log-probabilities of complete answers from an OpenAI-compatible server that scores given text.

    The OpenAI API itself returns log-probabilities only of the tokens it generates, so it cannot score a
    given answer. Servers built on vLLM (and ``python -m moralkit serve``) accept its extension of the chat
    API: ``prompt_logprobs=0`` returns ``log p(token | tokens before it)`` for every token of the rendered
    conversation. Each canonical answer is sent as the assistant's turn of its question
    (``add_generation_prompt: false``), so the server's own chat template renders it; the answer's
    log-probability is the sum over its tokens plus that of the template's end-of-turn token after it. The
    answer starts where the generation prompt of the same question ends (one extra request per question
    form gives its length).

    Parameters
    ----------
    backend : OpenAIBackend
        Its endpoint, key, ``concurrency``, ``max_retries``, ``timeout`` and ``backoff`` are used.

    Notes
    -----
    Checks made on every answer, each a :class:`~moralkit.errors.DataError` naming the problem: the server
    returned ``prompt_logprobs``; the tokens after the generation prompt spell the answer exactly (a
    template that rewrites an assistant turn, or a token that spans the start of the answer, is refused
    rather than mis-scored); an end-of-turn token follows it. Unlike :class:`TreeScorer`, only the template's
    own end-of-turn token counts as ending the answer (not every token that stops generation); the
    difference is the probability of the others, usually below 1e-5.

    References
    ----------
    Scherrer et al. (2023), Definition 1 and Section 2.3 (log-probabilities of given continuations, where an
    API exposes them).
    """

    def __init__(self, backend):
        if getattr(backend, "name", None) != "openai":
            raise MoralkitError("PromptLogprobScorer needs an OpenAI-compatible backend (make_backend('openai', ...))")
        self.backend = backend
        self.eos_ids = None
        self.end_tokens: set = set()
        self.tokens_scored = 0
        self.forward_seconds = 0.0
        self.question_types = ()
        self.systems: dict = {}

    def set_templates(self, systems: dict) -> None:
        """One system message per question type, as :meth:`TreeScorer.set_templates`."""
        self.question_types = tuple(systems)
        self.systems = dict(systems)

    def context(self, q: str, user: str):
        """What the answers of one question form share (for :func:`scenario_items`): the question text."""
        return user

    def item(self, q: str, context, answer: str):
        """One scoring item: (question type, system message, question, answer)."""
        return (q, self.systems[q], context, answer)

    def record_fields(self) -> dict:
        """Fields this scorer adds to each scenario's record: ``end_tokens``, the template's end-of-turn
        token(s) seen after the answers so far."""
        return {"end_tokens": sorted(self.end_tokens)}

    @staticmethod
    def _messages(system, user, answer=None):
        m = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        return m + ([{"role": "assistant", "content": answer}] if answer is not None else [])

    async def _post(self, session, sem, messages, score: bool) -> dict:
        """One request, with the backend's retries, rate limit and error handling; the response's JSON."""
        from .backends import Request, Sampling

        extra = {"add_generation_prompt": not score, "skip_special_tokens": False}
        if score:
            extra["prompt_logprobs"] = 0
        req = Request(messages=tuple(messages), sampling=Sampling(temperature=1.0, max_tokens=1), extra_body=extra)
        c = await self.backend._with_retries(session, sem, req)
        if c.error is not None:
            from .secrets import Redactor

            raise MoralkitError(
                f"scoring request to {self.backend.base_url or 'the OpenAI API'} failed: "
                f"{Redactor(self.backend.secrets()).error_text(c.error, 600)}. A server that refuses `prompt_logprobs` or "
                "`add_generation_prompt` (HTTP 400) cannot score given answers: serve the model with vLLM or "
                "`python -m moralkit serve`, or use the transformers backend.")
        return c.data

    def _answer_logprob(self, data, n0: int, answer: str) -> float:
        """log p(answer, end of turn) from a scored conversation whose answer starts at token ``n0``."""
        return self.score_answer(data, n0, answer)[0]

    def score_answer(self, data, n0: int, answer: str):
        """``(logprob, tokens)``: log p(answer, end of turn) and the ``[decoded token, logprob]`` pairs it sums
        (the answer's tokens, then the end-of-turn token); a :class:`~moralkit.errors.DataError` when the
        response cannot score the answer exactly (see the class notes)."""
        plp = data.get("prompt_logprobs") if isinstance(data, dict) else None
        if not isinstance(plp, list):
            raise DataError(
                "the server returned no `prompt_logprobs`: it does not score given text (the OpenAI API never does). "
                "Serve the model with vLLM (its chat API takes prompt_logprobs) or `python -m moralkit serve`, "
                "or use the transformers backend.")
        ids = data.get("prompt_token_ids")
        toks = []
        for j, entry in enumerate(plp[n0:], start=n0):
            if not isinstance(entry, dict) or not entry:
                raise DataError(f"prompt_logprobs[{j}] is {entry!r}, expected {{token id: {{logprob, ...}}}}")
            if len(entry) == 1:
                (v,) = entry.values()
            elif isinstance(ids, list) and len(ids) == len(plp) and str(ids[j]) in entry:
                v = entry[str(ids[j])]
            else:
                raise DataError(f"prompt_logprobs[{j}] holds {len(entry)} tokens and the prompt's token ids are "
                                "not given: cannot tell which one is the prompt's (send prompt_logprobs=0)")
            lp = v.get("logprob") if isinstance(v, dict) else None
            if not isinstance(lp, (int, float)):
                raise DataError(f"prompt_logprobs[{j}] has no numeric logprob: {v!r}")
            toks.append((str(v.get("decoded_token") or ""), float(lp)))
        text, total = "", 0.0
        for k, (d, lp) in enumerate(toks):
            text += d
            total += lp
            if text == answer:
                if k + 1 >= len(toks):
                    raise DataError(f"no end-of-turn token follows the answer {answer!r} in the scored conversation")
                end = toks[k + 1][0]
                if self.end_tokens and end not in self.end_tokens:
                    raise DataError(f"the end-of-turn token differs between answers ({end!r} after {answer!r}, "
                                    f"{sorted(self.end_tokens)} before): the server's template does not end every "
                                    "assistant turn the same way, so the answers cannot be scored as complete turns")
                self.end_tokens.add(end)
                return total + toks[k + 1][1], [[d2, lp2] for d2, lp2 in toks[:k + 2]]
            if not answer.startswith(text):
                break
        raise DataError(
            f"the tokens after the generation prompt spell {text!r}, not the answer {answer!r}: the server's chat "
            "template changes an assistant turn, or a token spans the start of the answer; this server cannot "
            "score the answers exactly")

    async def _score(self, items):
        import asyncio

        sem = asyncio.Semaphore(self.backend.concurrency)
        async with self.backend.open_session() as session:
            keys = sorted({(sysm, user) for _, sysm, user, _ in items})
            heads = await asyncio.gather(*(self._post(session, sem, self._messages(sy, u), False) for sy, u in keys))
            n0 = {}
            for key, h in zip(keys, heads):
                n = (h.get("usage") or {}).get("prompt_tokens") if isinstance(h, dict) else None
                if not isinstance(n, int) or n < 1:
                    raise DataError(f"the server's response has no usage.prompt_tokens (got {n!r}); it is needed to "
                                    "find where the answer starts")
                n0[key] = n
            scored = await asyncio.gather(*(self._post(session, sem, self._messages(sy, u, a), True)
                                            for _, sy, u, a in items))
        res = []
        for (_, sy, u, a), data in zip(items, scored):
            res.append(self._answer_logprob(data, n0[(sy, u)], a))
            self.tokens_scored += int((data.get("usage") or {}).get("prompt_tokens") or 0)
        return res

    def score(self, items) -> list[float]:
        """Natural-log probability of each answer (followed by end of turn), as :meth:`TreeScorer.score`."""
        from .backends import run_sync

        t0 = time.perf_counter()
        try:
            return run_sync(self._score(list(items)))
        finally:
            self.forward_seconds += time.perf_counter() - t0


def make_scorer(backend):
    """The scorer for ``backend``: :class:`TreeScorer` for a local model, :class:`PromptLogprobScorer` for a server."""
    if getattr(backend, "name", None) == "openai":
        return PromptLogprobScorer(backend)
    return TreeScorer(backend)


def scenario_items(scorer, sc, templates, answers="canonical"):
    """The scorer items of one scenario: every question form's canonical answers.

    Returns
    -------
    items : list
        The scorer's own items (``scorer.item``): (question_type, continuation_tokens, answer_tokens) for
        :class:`TreeScorer`, (question_type, system, question, answer) for :class:`PromptLogprobScorer`;
        for ``scorer.score`` after ``scorer.set_templates``.
    meta : list of (question_type, ordering, answer, action)
    """
    from ..moralchoice import build_prompt
    from ..moralchoice.likelihood import canonical_answers

    items, meta = [], []
    for q in scorer.question_types:
        for o in (0, 1):
            _, text = build_prompt(sc, q, o, templates)
            context = scorer.context(q, text)
            for ans, act in canonical_answers(sc, q, o, templates, answers):
                items.append(scorer.item(q, context, ans))
                meta.append((q, o, ans, act))
    return items, meta


def scoring_order(chosen, table, order: str = "overlap-first", seed: int = 0):
    """The order in which :func:`run_likelihood` scores the scenarios of ``chosen`` (see its ``order``)."""
    from .moralchoice import select_scenarios

    if order == "table":
        return chosen.reset_index(drop=True)
    if order != "overlap-first":
        raise MoralkitError(f"order must be 'overlap-first' or 'table', got {order!r}")
    overlap = set(select_scenarios(table, n=min(200, len(table)), seed=0)["scenario_id"])
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 15_2023]))
    perm = rng.permutation(len(chosen))
    first = [i for i in perm if chosen.iloc[i]["scenario_id"] in overlap]
    rest = [i for i in perm if chosen.iloc[i]["scenario_id"] not in overlap]
    return chosen.iloc[first + rest].reset_index(drop=True)


def run_likelihood(backend, run_dir, *, ambiguity: str = "high", persona: str = "none", label=None, scenarios=None,
                   n_scenarios=None, scenario_seed: int = 0, answers: str = "canonical", question_types=None,
                   order: str = "overlap-first", source=None, progress: bool = True, export=None, limit=None,
                   compress_every: int = 20, return_report: bool = False, estimator: str = "token_probability",
                   samples=None, top_logprobs: int = 20, seed: int = 0):
    """Action likelihoods of every scenario and question form (resumable run), exact or from ``top_logprobs``.

    Parameters
    ----------
    backend : TransformersBackend or OpenAIBackend
        ``estimator="token_probability"``: a local model (scored by :class:`TreeScorer`), or an
        OpenAI-compatible server that returns ``prompt_logprobs`` (vLLM, ``python -m moralkit serve``; scored
        by :class:`PromptLogprobScorer` through :func:`moralkit.collect.runner.run_tasks`).
        ``estimator="top_logprobs"``: any OpenAI-compatible API that returns ``top_logprobs`` (OpenAI's
        non-reasoning chat models, vLLM, Together, ``moralkit serve``; see
        :mod:`moralkit.collect.logprob_api`).
    run_dir : path-like
        Run directory (``records.jsonl``, ``manifest.json``): one record per scenario (local model) or
        per request (server); re-running resumes.
    ambiguity : {"low", "high", "controversial"}
    persona : str, default "none"
        A persona of :mod:`moralkit.collect.personas`; its text precedes the
        template header in the system message, and the label gains
        ``+persona-<name>``.
    label : str, optional
        Model label (default: the backend's).
    scenarios, n_scenarios, scenario_seed
        As in :func:`moralkit.collect.run_moralchoice` (default: all scenarios).
    answers : {"canonical", "templates"}
        The canonical answer set (:mod:`moralkit.moralchoice.likelihood`).
    question_types : tuple of str, optional
        Default all three templates.
    order : {"overlap-first", "table"}
        ``"overlap-first"`` (default) scores first the scenarios of the committed
        sampling runs (``n_scenarios=200, scenario_seed=0`` of
        :func:`~moralkit.collect.moralchoice.select_scenarios`), then the others,
        each group in a seeded random order: a run stopped early holds a random
        subset, and the scenarios that can be compared with sampling come first.
        ``"table"``: table order. The order changes no result.
    limit : int, optional
        Score at most this many new scenarios in this session (the rest later).
    compress_every : int, default 20
        Refresh ``records.jsonl.gz`` every this many scenarios (and at the end).
    export : path-like, optional
        Write the tidy table (:func:`export_likelihood`) there at the end (also when requests remain:
        it holds the complete scenarios).
    return_report : bool
        Also return the session's :class:`~moralkit.collect.runner.RunReport`.
    estimator : {"token_probability", "top_logprobs"}
        ``token_probability`` (default): the exact likelihoods of the canonical answers (teacher forcing).
        ``top_logprobs``: the first output token's ``top_logprobs`` of one request per ``ab`` and ``compare``
        form (:mod:`moralkit.collect.logprob_api`); the ``repeat`` form cannot be scored so and is **sampled**
        (``samples`` answers per ordering at temperature 1; its rows carry ``estimator = "sampling"``, and
        the manifest says so under ``form_estimators`` and ``fallback``).
    samples : int, optional
        ``top_logprobs`` only: samples of each ``repeat`` form (default the paper's M: 5 low, 10 high).
    top_logprobs : int, default 20
        ``top_logprobs`` only: alternatives asked for (1..20; OpenAI's maximum is 20).
    seed : int, default 0
        ``top_logprobs`` only: the run seed (a seed per request is derived from it).

    Returns
    -------
    DataFrame
        The tidy likelihood table of the run (:func:`likelihood_frame`); with ``return_report``,
        ``(frame, report)``. Its ``estimator`` column names each row's estimator.

    Raises
    ------
    CollectionIncompleteError
        Requests are left undone (they kept failing); completed records are saved, the export written,
        and re-running resumes without re-sending an answered request.
    CollectionRefusedError
        A response no retry can fix (wrong key, unknown model, a server that does not return
        ``prompt_logprobs``) stopped the session.

    References
    ----------
    Scherrer et al. (2023), Definition 1, Section 3.3.
    """
    from .. import moralchoice as mc
    from ..moralchoice.likelihood import ANSWER_SETS
    from .moralchoice import DEFAULT_SAMPLES, select_scenarios
    from .personas import get_persona, persona_label

    if estimator not in LIKELIHOOD_ESTIMATORS:
        raise MoralkitError(f"estimator must be one of {LIKELIHOOD_ESTIMATORS}, got {estimator!r}")
    api = estimator == "top_logprobs"
    if api and getattr(backend, "name", None) != "openai":
        raise MoralkitError(f"the top_logprobs estimator asks an OpenAI-compatible API for log-probabilities; got a "
                            f"{getattr(backend, 'name', type(backend).__name__)!r} backend. For a local model use "
                            "estimator='token_probability' (exact); Anthropic's API returns no log-probabilities")
    if api:
        M = DEFAULT_SAMPLES.get(ambiguity, 5) if samples is None else samples
        if isinstance(M, bool) or not isinstance(M, (int, np.integer)) or M < 1:
            raise MoralkitError(f"samples must be a positive integer, got {samples!r}")
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, (int, np.integer)) or \
                not 1 <= top_logprobs <= 20:
            raise MoralkitError(f"top_logprobs must be an integer in [1, 20] (OpenAI's range), got {top_logprobs!r}")
    elif samples is not None:
        raise MoralkitError("samples applies to estimator='top_logprobs' only (its sampled repeat form)")
    if answers not in ANSWER_SETS:
        raise MoralkitError(f"answers must be one of {ANSWER_SETS}, got {answers!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
        raise MoralkitError(f"limit must be None or a non-negative integer, got {limit!r}")
    p = get_persona(persona)
    label = persona_label(label or backend.model, p.name)
    if not re.fullmatch(r"[A-Za-z0-9._@+-]+", label):
        raise DataError(f"label must be a file-name-safe string (letters, digits, . _ @ + -), got {label!r}")
    qts = tuple(question_types) if question_types else tuple(mc.QUESTION_TYPES)
    bad = [q for q in qts if q not in mc.QUESTION_TYPES]
    if bad:
        raise MoralkitError(f"unknown question types {bad}; choose from {mc.QUESTION_TYPES}")
    table = mc.load_scenarios(ambiguity, source=source)
    chosen = select_scenarios(table, scenarios, n_scenarios, scenario_seed)
    templates = mc.load_templates(source)
    scorer = None if api else make_scorer(backend)
    systems = {q: persona_system(templates.questions[q].question_header, p.name) for q in qts}
    manifest = dict(
        survey="moralchoice-likelihood", label=label, backend=backend.name, model=backend.model, ambiguity=ambiguity,
        persona=p.name, persona_system=p.system, persona_source=p.source, answers=None if api else answers,
        dtype=getattr(backend, "dtype", None), estimator=estimator,
        eos_token_ids=None if api else scorer.eos_ids, backend_info=backend.info(), versions=package_versions(),
        git_commit=git_commit(),
        session=dict(session_info(), scenarios=len(chosen), question_types=list(qts), n_scenarios=n_scenarios,
                     scenario_seed=scenario_seed, limit=limit, order=order),
    )
    identity = LIKELIHOOD_IDENTITY
    if api:
        from .logprob_api import FORM_ESTIMATORS, REPEAT_FALLBACK

        manifest.update(top_logprobs=int(top_logprobs), repeat_samples=int(M) if "repeat" in qts else None,
                        seed=int(seed), form_estimators={q: FORM_ESTIMATORS[q] for q in qts},
                        sampling={"temperature": 1.0, "top_p": 1.0},
                        fallback={"repeat": REPEAT_FALLBACK} if "repeat" in qts else {})
        identity = LIKELIHOOD_IDENTITY + TOP_LOGPROBS_IDENTITY
    store = RecordStore(run_dir, manifest, identity_keys=identity, secrets=getattr(backend, "secrets", list)())
    ordered = [sc for _, sc in scoring_order(chosen, table, order).iterrows()]
    common = dict(run=Path(run_dir).name, survey="moralchoice-likelihood", label=label, backend=backend.name,
                  model=backend.model, ambiguity=ambiguity, persona=p.name, answers=None if api else answers)
    try:
        if api:
            from .logprob_api import collect_top_logprobs

            report = collect_top_logprobs(backend, store, ordered, templates, systems, qts, common, samples=int(M),
                                          top_logprobs=int(top_logprobs), seed=int(seed), limit=limit,
                                          compress_every=compress_every, progress=progress,
                                          desc=f"top_logprobs {ambiguity} {label}")
        elif isinstance(scorer, PromptLogprobScorer):
            report = _score_by_requests(scorer, store, ordered, templates, systems, answers, common, limit,
                                        compress_every, progress, f"likelihood {ambiguity} {label}")
        else:
            report = _score_by_scenario(scorer, store, ordered, templates, systems, answers, common, limit,
                                        compress_every, progress, f"likelihood {ambiguity} {label}")
        sess = store.manifest["sessions"][-1] if store.manifest.get("sessions") else None
        if sess is not None:
            sess["result"] = report.to_dict()
        store.update_manifest(last_finished=utc_now())
    finally:
        store.compress()
        store.close()
    df = likelihood_frame(run_dir)
    if export is not None:
        export_likelihood([run_dir], export)
    if not report.complete:
        raise incomplete_error(report, *LIKELIHOOD_LINE["api" if api or isinstance(scorer, PromptLogprobScorer)
                                                        else "tree"])
    return (df, report) if return_report else df


def _bar(progress, total, desc, unit):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit)


def _score_by_scenario(scorer, store, ordered, templates, systems, answers, common, limit, compress_every, progress,
                       desc) -> RunReport:
    """A local model: one forward pass and one record per scenario (task = scenario id, attempt 1)."""
    rep = RunReport(tasks=len(ordered))
    bar = _bar(progress, len(ordered), desc, "scenario")
    t_wall = time.perf_counter()
    try:
        todo = [sc for sc in ordered if not store.has(sc["scenario_id"], 1)]
        if bar is not None:
            bar.update(len(ordered) - len(todo))
        if todo:
            scorer.set_templates(systems)
        done_now = 0
        for sc in todo:
            if limit is not None and done_now >= int(limit):
                break
            started = utc_now()
            t0 = time.perf_counter()
            n0 = scorer.tokens_scored
            items, meta = scenario_items(scorer, sc, templates, answers)
            lps = scorer.score(items)
            forms = {}
            for (q, o, ans, act), lp in zip(meta, lps):
                forms.setdefault(f"{q}:{o}", []).append([ans, act, lp])
            store.append(dict(kind="attempt", task=sc["scenario_id"], attempt=1, run=common["run"],
                              survey="moralchoice-likelihood", label=common["label"], backend=common["backend"],
                              model=common["model"], scenario_id=sc["scenario_id"], ambiguity=common["ambiguity"],
                              persona=common["persona"], answers=answers, forms=forms,
                              tokens=scorer.tokens_scored - n0, **scorer.record_fields(),
                              started=started, finished=utc_now(), latency_s=round(time.perf_counter() - t0, 4)))
            done_now += 1
            rep.sent += 1
            rep.attempts += 1
            if compress_every and done_now % int(compress_every) == 0:
                store.compress()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        rep.wall_seconds = time.perf_counter() - t_wall
    for sc in ordered:
        if store.has(sc["scenario_id"], 1):
            rep.done += 1
            rep.answered += 1
        else:
            rep.undone.append(sc["scenario_id"])
    if rep.undone and limit is not None:
        rep.undone = []  # scenarios left for a later session by --limit are not a failure
        rep.tasks = rep.done
    return rep


def _form_tasks(scorer, sc, templates, answers, n_forms):
    """The requests of one scenario: per question form, a ``head`` (where the answer starts), then one per
    canonical answer (the answer as the assistant's turn, scored by ``prompt_logprobs``)."""
    from ..moralchoice import build_prompt
    from ..moralchoice.likelihood import canonical_answers

    sid = sc["scenario_id"]
    heads, items = [], []
    for q in scorer.question_types:
        for o in (0, 1):
            _, text = build_prompt(sc, q, o, templates)
            system = scorer.systems[q]
            head = f"{sid}|{q}|{o}|head"
            base = dict(scenario_id=sid, question_type=q, ordering=o, n_forms=n_forms)
            heads.append(Task(head, text, dict(base, part="head"), system=system,
                              messages=tuple(scorer._messages(system, text)),
                              extra_body={"add_generation_prompt": True, "skip_special_tokens": False}))
            cans = canonical_answers(sc, q, o, templates, answers)
            for k, (ans, act) in enumerate(cans):
                items.append(Task(f"{sid}|{q}|{o}|a{k}", text,
                                  dict(base, part="answer", index=k, n_answers=len(cans), answer=ans, action=act),
                                  system=system, messages=tuple(scorer._messages(system, text, ans)),
                                  extra_body={"add_generation_prompt": False, "skip_special_tokens": False,
                                              "prompt_logprobs": 0},
                                  context=head))
    return heads, items


def _score_by_requests(scorer, store, ordered, templates, systems, answers, common, limit, compress_every, progress,
                       desc) -> RunReport:
    """A server: every request through :func:`~moralkit.collect.runner.run_tasks`, ``compress_every`` scenarios
    at a time (their heads, then their answers)."""
    from .backends import Sampling

    scorer.set_templates(systems)
    n_forms = 2 * len(scorer.question_types)
    for r in store.records:  # the end-of-turn token seen in earlier sessions (every answer must end alike)
        if r.get("kind", "attempt") == "attempt" and r.get("part") == "answer" and isinstance(r.get("parsed"), dict):
            if r["parsed"].get("end_token") is not None:
                scorer.end_tokens.add(r["parsed"]["end_token"])
    per = [(sc, *_form_tasks(scorer, sc, templates, answers, n_forms)) for sc in ordered]

    def done(t):
        return any(a.get("status") == "ok" for a in store.attempts(t.task))

    todo = [x for x in per if not all(done(t) for t in x[1] + x[2])]
    if limit is not None:
        todo = todo[:int(limit)]
    sampling = Sampling(temperature=1.0, max_tokens=1)

    def parse_head(t, c):
        n = (c.data or {}).get("usage", {}).get("prompt_tokens") if isinstance(c.data, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise DataError(f"the server's response has no usage.prompt_tokens (got {n!r}); it is needed to find "
                            "where the answer starts")
        return n, "ok"

    def parse_answer(t, c):
        head = [a for a in store.attempts(t.context) if a.get("status") == "ok"]
        lp, toks = scorer.score_answer(c.data, int(head[0]["parsed"]), t.fields["answer"])
        return {"logprob": lp, "end_token": toks[-1][0], "tokens": toks}, "ok"

    total = sum(len(h) + len(a) for _, h, a in todo)
    rep = RunReport()
    bar = _bar(progress, total, desc, "request")
    chunk = max(1, int(compress_every or len(todo) or 1))
    try:
        for i in range(0, len(todo), chunk):
            part = todo[i:i + chunk]
            heads = [t for _, h, _ in part for t in h]
            if rep.stopped:
                rep.tasks += sum(len(h) + len(a) for _, h, a in part)
                rep.undone += [t.task for _, h, a in part for t in h + a if not done(t)]
                continue
            r1 = run_tasks(scorer.backend, store, heads, parse_head, seed=0, sampling=sampling, common=common,
                           bar=bar, parse_completion=True)
            ready = [t for _, _, a in part for t in a if any(x.get("status") == "ok" for x in
                                                              store.attempts(t.context))]
            blocked = [t for _, _, a in part for t in a if t not in ready]
            r2 = run_tasks(scorer.backend, store, ready, parse_answer, seed=0, sampling=sampling, common=common,
                           bar=bar, parse_completion=True) if ready and not r1.stopped else \
                RunReport(tasks=len(ready), undone=[t.task for t in ready if not done(t)])
            r2.tasks += len(blocked)
            r2.undone += [t.task for t in blocked]  # their question form's head is not answered yet
            rep = rep.merge(r1).merge(r2)
            store.compress()
    finally:
        if bar is not None:
            bar.close()
    return rep


def likelihood_frame(run_dir_or_records, label=None):
    """The tidy likelihood table of a run (:data:`moralkit.moralchoice.likelihood.LIKELIHOOD_COLUMNS`).

    Every estimator's records: one per scenario (local model), one per scoring request (a server's
    ``prompt_logprobs``), or a ``top_logprobs`` run's (:func:`moralkit.collect.logprob_api.top_logprob_rows`);
    the ``estimator`` column says which.

    ``model`` is the respondent's label, as ``model_id`` in the MoralChoice response files and ``model``
    in the PSM files.
    """
    from ..moralchoice.likelihood import combine_logprobs, likelihood_table
    from .logprob_api import top_logprob_rows

    recs = run_dir_or_records if isinstance(run_dir_or_records, list) else read_records(run_dir_or_records)
    rows = top_logprob_rows(recs, label)
    scored: dict = {}  # per-request records (a server): scenario -> form -> {index: (answer, action, logprob)}
    for r in recs:
        if r.get("kind", "attempt") != "attempt":
            continue
        if "forms" in r:  # one record per scenario (a local model)
            for form, ans in r["forms"].items():
                q, o = form.split(":")
                lp = [(-math.inf if a[2] is None else float(a[2])) for a in ans]
                rows.append(dict(model=label or r["label"], scenario_id=r["scenario_id"], question_type=q,
                                 ordering=int(o), **combine_logprobs(lp, [a[1] for a in ans]),
                                 estimator="token_probability"))
        elif r.get("part") == "answer" and r.get("status") == "ok":
            sc = scored.setdefault(r["scenario_id"], {"label": r["label"], "n_forms": int(r["n_forms"]), "forms": {}})
            form = sc["forms"].setdefault((r["question_type"], int(r["ordering"])), {"n": int(r["n_answers"])})
            form[int(r["index"])] = (r["answer"], r["action"], float(r["parsed"]["logprob"]))
    for sid, sc in scored.items():  # a scenario enters the table once every answer of every form is scored
        forms = sc["forms"]
        if len(forms) != sc["n_forms"] or any(len(f) - 1 != f["n"] for f in forms.values()):
            continue
        for (q, o), f in forms.items():
            ans = [f[k] for k in range(f["n"])]
            rows.append(dict(model=label or sc["label"], scenario_id=sid, question_type=q, ordering=o,
                             **combine_logprobs([a[2] for a in ans], [a[1] for a in ans]),
                             estimator="token_probability"))
    return likelihood_table(rows)


def export_likelihood(run_dirs, path) -> Path:
    """Write the tidy likelihood table (``.csv.gz``) of one or more runs of one respondent."""
    import pandas as pd

    from ..moralchoice.likelihood import write_likelihoods
    from .store import distinct_runs

    run_dirs = distinct_runs(run_dirs)
    df = pd.concat([likelihood_frame(d) for d in run_dirs], ignore_index=True)
    if df["model"].nunique() > 1:
        raise DataError(f"one likelihood file holds one respondent; got {sorted(df['model'].unique())}")
    return write_likelihoods(df, path)
