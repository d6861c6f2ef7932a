"""A fake Anthropic Messages API on 127.0.0.1 (a test double: answers are a hash of the prompt, never data).

What it imitates of ``POST /v1/messages``:

- the request: ``model``, ``messages`` (roles ``user`` / ``assistant`` only; a ``"system"`` role is a 400
  that points to the top-level ``system``), ``system``, ``max_tokens`` (required: "max_tokens: Field
  required"), ``stop_sequences``, ``metadata``, ``output_config.effort`` (``low`` ... ``max``). Any other
  field (``seed``, ``reasoning_effort``, ``max_completion_tokens``, ...) is a 400 "<field>: Extra inputs are
  not permitted" -- and so are ``temperature``, ``top_p`` and ``top_k``, even at their defaults, under the
  ``anthropic-version`` 2026-10-21 that the ``anthropic`` 2.x SDK sends. Under ``2023-06-01`` they are
  accepted (``temperature`` 0 to 1), but models in :data:`NO_TEMPERATURE_WITH_TOP_P` (Claude Sonnet/Haiku
  4.5 and later, Opus 4.1 and later) refuse ``temperature`` with ``top_p``: "`temperature` and `top_p`
  cannot both be specified for this model. Please use only one.";
- the answer: ``{"id": "msg_...", "type": "message", "role": "assistant", "model", "content": [{"type":
  "text", "text"}], "stop_reason": "end_turn" | "max_tokens", "usage": {"input_tokens", "output_tokens"}}``.
  An answer longer than ``max_tokens`` is cut with ``stop_reason: "max_tokens"``. A *thinking* model
  (``kind="thinking"``) spends :attr:`FakeAnthropic.thinking_tokens` on a thinking block first: with a
  smaller budget its content has no text block and ``stop_reason`` is ``"max_tokens"``;
- errors: ``{"type": "error", "error": {"type": "invalid_request_error" | "authentication_error" |
  "not_found_error" | "rate_limit_error" | "api_error" | "overloaded_error", "message"}, "request_id"}``;
  401 for a wrong key (``x-api-key`` or ``Authorization: Bearer``), 404 for an unknown model, 429 and 529 with ``retry-after``;
- headers: ``request-id`` and ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
  {limit,remaining,reset}`` on every response.

The answer depends on the prompt and, at a temperature above 0, on a per-server draw (Anthropic has no
seed): :attr:`FakeHTTPServer.usable` logs each answer with its message id.

References
----------
Anthropic, Messages API: https://docs.claude.com/en/api/messages; errors and their shapes:
https://docs.claude.com/en/api/errors; rate limits and their headers:
https://docs.claude.com/en/api/rate-limits. The temperature/top_p 400 as reported in BerriAI/litellm#15097
and open-webui/open-webui#17922; API version 2026-10-21 (no sampling parameters, the key as ``Authorization:
Bearer``): https://developersdigest.tech/blog/claude-api-version-2026-10-21-sdk-migration.
"""

from __future__ import annotations

from dataclasses import dataclass

from .faultserver import fake_answer
from .httpfake import FakeHTTPServer, Reply, count_tokens, stable_hash

__all__ = ["FakeAnthropic", "ClaudeSpec", "DEFAULT_CLAUDES", "NO_TEMPERATURE_WITH_TOP_P", "MESSAGE_FIELDS",
           "SAMPLING_FIELDS", "EFFORTS"]

#: The request fields of ``POST /v1/messages`` the fake accepts in API version 2026-10-21 (a subset of the
#: documented ones): no sampling parameters.
MESSAGE_FIELDS = ("model", "messages", "system", "max_tokens", "stop_sequences", "metadata", "stream",
                  "output_config")

#: The sampling fields API version 2023-06-01 also accepts.
SAMPLING_FIELDS = ("temperature", "top_p", "top_k")

#: The ``output_config.effort`` values.
EFFORTS = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class ClaudeSpec:
    """A fake Claude model: ``kind`` is ``"chat"`` or ``"thinking"`` (spends tokens before its text)."""

    kind: str = "chat"
    #: refuses ``temperature`` together with ``top_p`` (the 4.5 generation)
    exclusive_sampling: bool = True


DEFAULT_CLAUDES = {"claude-sonnet-4-6": ClaudeSpec(), "claude-haiku-4-5": ClaudeSpec(), "claude-opus-4-7": ClaudeSpec(),
                   "claude-3-haiku-20240307": ClaudeSpec(exclusive_sampling=False),
                   "claude-thinker": ClaudeSpec(kind="thinking")}

#: Models that refuse ``temperature`` with ``top_p``.
NO_TEMPERATURE_WITH_TOP_P = tuple(m for m, s in DEFAULT_CLAUDES.items() if s.exclusive_sampling)


class FakeAnthropic(FakeHTTPServer):
    """The fake Messages API; ``srv.url`` is the SDK's ``base_url`` (``http://127.0.0.1:PORT``).

    Parameters
    ----------
    models : dict, optional
        Model name -> :class:`ClaudeSpec` (default :data:`DEFAULT_CLAUDES`).
    thinking_tokens : int
        Tokens a ``"thinking"`` model spends before its text.
    **kw
        :class:`~moralkit.testing.httpfake.FakeHTTPServer` options (``api_key``, faults, latency).
    """

    prefix = ""
    routes = (("POST", r"/v1/messages", "messages"),
              ("GET", r"/v1/models", "list_models"))

    def __init__(self, models=None, thinking_tokens=300, **kw):
        kw.setdefault("faults", ("429", "529", "500"))
        super().__init__(**kw)
        self.models = dict(DEFAULT_CLAUDES if models is None else models)
        self.thinking_tokens = int(thinking_tokens)
        self.remaining = 4000

    # ------------------------------------------------------------------ provider shape
    def error_body(self, status, kind, message):
        types = {"rate_limit": "rate_limit_error", "overloaded": "overloaded_error", "server": "api_error",
                 "unavailable": "api_error", "not_found": "not_found_error",
                 "authentication": "authentication_error", "invalid_request": "invalid_request_error"}
        if kind == "authentication":
            message = "invalid x-api-key"
        return {"type": "error", "error": {"type": types.get(kind, "invalid_request_error"), "message": message},
                "request_id": f"req_{stable_hash(self.seed, self.n, 'e') % 16**24:024x}"}

    def auth_ok(self, headers):
        # the key comes as ``x-api-key`` or, from recent SDKs, as ``Authorization: Bearer``
        return self.api_key is None or self.api_key in (headers.get("x-api-key"),
                                                        (headers.get("authorization") or "")[len("Bearer "):])

    def common_headers(self):
        with self._lock:
            self.remaining = max(0, self.remaining - 1)
            rem = self.remaining
        reset = "2026-01-01T00:00:30Z"
        h = {"request-id": f"req_{stable_hash(self.seed, self.n, 'h') % 16**24:024x}"}
        for kind, limit in (("requests", 4000), ("tokens", 2_000_000), ("input-tokens", 2_000_000),
                            ("output-tokens", 400_000)):
            h[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
            h[f"anthropic-ratelimit-{kind}-remaining"] = str(rem if kind == "requests" else limit - 1000)
            h[f"anthropic-ratelimit-{kind}-reset"] = reset
        return h

    def _invalid(self, message):
        return Reply(400, self.error_body(400, "invalid_request", message))

    # ------------------------------------------------------------------ routes
    def list_models(self, body, headers, match):
        return Reply(200, {"data": [{"type": "model", "id": m, "display_name": m} for m in self.models],
                           "has_more": False})

    def messages(self, body, headers, match):
        version = headers.get("anthropic-version", "2023-06-01")
        fields = MESSAGE_FIELDS + (SAMPLING_FIELDS if version < "2026-10-21" else ())
        for k in body:
            if k not in fields:
                return self._invalid(f"{k}: Extra inputs are not permitted")
        oc = body.get("output_config")
        if oc is not None and (not isinstance(oc, dict) or oc.get("effort") not in EFFORTS + (None,)):
            return self._invalid("output_config.effort: Input should be " + ", ".join(map(repr, EFFORTS)))
        if "max_tokens" not in body:
            return self._invalid("max_tokens: Field required")
        model = body.get("model")
        spec = self.models.get(model)
        if spec is None:
            return Reply(404, self.error_body(404, "not_found", f"model: {model}"))
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return self._invalid("messages: Field required")
        for m in msgs:
            if m.get("role") not in ("user", "assistant"):
                return self._invalid(f"messages: Unexpected role \"{m.get('role')}\". The Messages API accepts a "
                                     "top-level `system` parameter, not \"system\" as an input message role.")
        t = body.get("temperature")
        if t is not None and not 0 <= float(t) <= 1:
            return self._invalid("temperature: Input should be less than or equal to 1")
        if spec.exclusive_sampling and "temperature" in body and "top_p" in body:
            return self._invalid("`temperature` and `top_p` cannot both be specified for this model. "
                                 "Please use only one.")
        budget = int(body["max_tokens"])
        if budget < 1:
            return self._invalid("max_tokens: Input should be greater than or equal to 1")
        convo = ([{"role": "system", "content": body["system"]}] if body.get("system") else []) + msgs
        draw = None if t == 0 else stable_hash(self.seed, "draw", self.n)
        answer = fake_answer(convo, draw)
        think = self.thinking_tokens if spec.kind == "thinking" else 0
        content = []
        if think:
            content.append({"type": "thinking", "thinking": "(hidden)", "signature": "fake"})
        need = think + count_tokens(answer)
        if budget >= need:
            text, stop, used = answer, "end_turn", need
        elif budget <= think:
            text, stop, used = None, "max_tokens", budget
        else:
            left, kept = budget - think, []
            for w in answer.split(" "):
                if count_tokens(" ".join(kept + [w])) > left:
                    break
                kept.append(w)
            text, stop, used = " ".join(kept), "max_tokens", budget
        if text is not None:
            content.append({"type": "text", "text": text})
        mid = self.next_id("msg_")
        input_tokens = self.prompt_tokens(convo) if self.prompt_tokens is not None else sum(
            count_tokens(m["content"] if isinstance(m["content"], str) else str(m["content"])) + 3 for m in convo)
        out = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": content,
               "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": input_tokens, "output_tokens": used}}
        self.log_usable(mid, text or "")
        return Reply(200, out)
