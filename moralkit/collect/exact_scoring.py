"""Exact scoring of MoralChoice answers by teacher forcing: a local model's or a server's token probabilities.

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

Collections with these scorers (records, resume, the tidy table) are run by
:func:`moralkit.collect.likelihood_run.run_likelihood`.

References
----------
Scherrer et al. (2023), Definition 1 (eq. 1), Section 2.3, Section 3.3 (the
templates' instruction header, one question per fresh context, temperature 1:
the model's own distribution, no truncation), Appendix B.
"""


from __future__ import annotations

import inspect
import time

import numpy as np

from ..errors import DataError, MoralkitError

__all__ = ["TreeScorer", "PromptLogprobScorer", "make_scorer", "scenario_items", "persona_system"]

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
        if self._kv is None:
            raise MoralkitError("call set_prefixes() first")
        token, parent, depth, root, paths = self._trie(items)
        allowed, pos, need = self._attention(token, parent, depth, root, paths)
        logp, eos = self._forward(token, allowed, pos, need)
        row = {n: r for r, n in enumerate(need)}
        res = []
        for nodes, c, seq in paths:
            lp = 0.0
            for j in range(c, len(nodes)):
                lp += float(logp[row[nodes[j - 1]], seq[j]])
            lp += float(eos[row[nodes[-1]]])
            res.append(lp)
        return res

    def _trie(self, items):
        """Phase 1 of :meth:`score`: the items' tokens as one trie, a node per distinct (prefix, tokens so far).

        Returns ``(token, parent, depth, root, paths)``: per node its token, parent node (-1 at a root), depth
        after the prefix and prefix name; per item its nodes, the continuation's length and its tokens.
        """
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
        return token, parent, depth, root, paths

    def _attention(self, token, parent, depth, root, paths):
        """Phase 2 of :meth:`score`: who sees whom. Each node attends to its own cached prefix and to its
        ancestors in the trie, at the position it would have in its own chat.

        Returns ``(allowed, pos, need)``: the boolean mask (nodes x prefix tokens + nodes), the position ids,
        and the nodes whose next-token distribution is needed (the node before each answer token, and the
        last node of each item).
        """
        torch = self.torch
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
        need = sorted({nodes[j - 1] for nodes, c, _ in paths for j in range(c, len(nodes))} |
                      {nodes[-1] for nodes, _, _ in paths})
        return allowed, pos, need

    def _forward(self, token, allowed, pos, need):
        """Phase 3 of :meth:`score`: one forward pass over every node after the cached prefixes; the
        log-softmax of the needed rows and their end-of-turn log-probability."""
        torch = self.torch
        from transformers import DynamicCache

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
        self.tokens_scored += len(token)
        return logp, eos

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
