"""What a collection costs: before (an estimate), during (a budget and a tokens-per-minute limit) and after.

Three parts:

- **Prices** (:func:`~moralkit.collect.prices.price_for`, :mod:`moralkit.collect.prices`): per million input and output tokens, from the maintained price table of
  the ``genai-prices`` package (its bundled snapshot: no network), or given by the user
  (``--price-in`` / ``--price-out``). The batch price is the table's ``processing = batch`` variant, else
  half the online price: OpenAI's Batch API and Anthropic's Message Batches both bill 50 % of the
  standard price (https://platform.claude.com/docs/en/build-with-claude/batch-processing;
  OpenAI's Batch API guide).
- **Tokens** (:class:`~moralkit.collect.tokens.TokenCounter`, :mod:`moralkit.collect.tokens`): counted with the model's own tokenizer and chat template when one is
  at hand (the local models), else estimated from the committed runs' measured tokens per prompt
  (:data:`~moralkit.collect.tokens.CALIBRATION`: for each kind of prompt, the tokens the servers counted per character of the
  chat's text, and the mean answer length). ``tiktoken`` is not used: it downloads its BPE files from the
  internet at first use, so it does not work offline.
- **Modes** (:func:`estimate_table`): ``online`` (one request per sample, as the collectors send them
  today), ``n = M`` (the M samples of a MoralChoice form in one request; OpenAI's ``n`` bills the prompt
  once and the generated tokens of all choices: "you will be charged based on the number of generated
  tokens across all of the choices", API reference, ``n``), ``batch`` (the batch price) and
  ``logprobs`` (the A/B and compare forms as one request with one output token whose log-probabilities
  give the action likelihoods; the repeat form cannot be scored this way and is sampled).

During a run a :class:`CostMeter` (attached to a backend as ``backend.cost_meter``) adds up the tokens the
server reports, refuses to send a request that could take the run over ``max_cost`` (the run stops cleanly
and stays resumable), and paces requests to ``tpm`` tokens per minute with ``aiolimiter``.

References
----------
Seror (2025), Section 2.1 (161 prompts, up to three attempts each); Scherrer et al. (2023), Section 3.3
(six question forms, M = 5 low / 10 high samples each).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..checks import check_choice, check_int
from ..errors import MoralkitError
from .prices import Price, format_usd, price_for  # noqa: F401  (importable from this module as before)
from .tokens import CALIBRATION, TokenCounter, calibrate, prompt_kind  # noqa: F401  (as before)

# Prices (Price, price_for, format_usd) live in moralkit.collect.prices, token counts (TokenCounter,
# CALIBRATION, calibrate) in moralkit.collect.tokens.
__all__ = ["Part", "psm_parts", "moralchoice_parts", "estimate_table", "MODES", "CostMeter", "records_usage",
           "PAPER_SCENARIOS", "survey_parts", "counter_for", "markdown_table", "estimate_markdown"]

#: MoralChoice scenarios after the degenerate ones are excluded (low, high): 687 + 679 = 1,366 (the high table
#: has 680 rows, one of them degenerate).
PAPER_SCENARIOS = {"low": 687, "high": 679}


# --------------------------------------------------------------------------- plans and modes


@dataclass
class Part:
    """Requests of one kind: ``prompts`` distinct prompts, each asked ``samples`` times.

    ``input_tokens`` is the sum over the distinct prompts (one copy each); ``output_tokens`` the
    expected answer length of one sample; ``attempts`` the expected requests per sample (the PSM re-asks
    a round without a valid answer, up to 3 times).
    """

    survey: str
    kind: str
    prompts: int
    samples: int
    input_tokens: int
    output_tokens: float
    attempts: float = 1.0
    label: str = ""


def psm_parts(counter: TokenCounter, *, system: str | None = None, design_seed: int = 0, limit: int | None = None,
              attempts: float = 1.0, max_tokens: int = 16) -> list[Part]:
    """The PSM's requests: round 0 and the 160 constrained rounds (``limit``: the first ``limit``).

    The rounds' options are those of the nominal corners (the corner flip, set by the answer to round 0,
    changes a few characters per option, not their number).
    """
    from ..psm.design import constrained_prompt, make_design, unconstrained_prompt

    design = make_design(design_seed)
    sysm = [{"role": "system", "content": system}] if system else []
    rounds = list(design)[: (len(design) if limit is None else int(limit))]
    r0 = counter.count(sysm + [{"role": "user", "content": unconstrained_prompt()}], "psm-r0")
    rin = sum(counter.count(sysm + [{"role": "user", "content": constrained_prompt(rd.options(None))}], "psm-round")
              for rd in rounds)
    return [Part("psm", "psm-r0", 1, 1, r0, min(counter.output_tokens("psm-r0"), max(max_tokens, 32)), attempts,
                 "round 0"),
            Part("psm", "psm-round", len(rounds), 1, rin, min(counter.output_tokens("psm-round"), max_tokens),
                 attempts, "constrained rounds")]


def moralchoice_parts(counter: TokenCounter, ambiguity: str, *, scenarios=None, n_scenarios=None,
                      scenario_seed: int = 0, samples=None, question_types=None, header: str = "system",
                      source=None, max_tokens=None) -> list[Part]:
    """MoralChoice's requests: per question type, 2 orderings x the chosen scenarios, M samples each."""
    import warnings

    from .. import moralchoice as mc
    from .moralchoice import DEFAULT_MAX_TOKENS, DEFAULT_SAMPLES, select_scenarios

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = mc.load_scenarios(ambiguity, source=source)
        templates = mc.load_templates(source)
    chosen = select_scenarios(table, scenarios, n_scenarios, scenario_seed)
    M = DEFAULT_SAMPLES.get(ambiguity, 5) if samples is None else int(samples)
    mt = dict(DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, dict):
        mt.update(max_tokens)
    elif max_tokens is not None:
        mt = {q: int(max_tokens) for q in mt}
    parts = []
    for q in (tuple(question_types) if question_types else tuple(mc.QUESTION_TYPES)):
        total = 0
        for _, sc in chosen.iterrows():
            for o in (0, 1):
                h, text = mc.build_prompt(sc, q, o, templates)
                msgs = ([{"role": "user", "content": h + text}] if header == "prepend"
                        else [{"role": "system", "content": h}, {"role": "user", "content": text}])
                total += counter.count(msgs, q)
        parts.append(Part(f"moralchoice-{ambiguity}", q, 2 * len(chosen), M, total,
                          min(counter.output_tokens(q), mt[q]), 1.0, f"{ambiguity} {q}"))
    return parts


#: The modes of :func:`estimate_table`: (name, batch price, M samples in one request, log-probabilities for
#: the A/B and compare forms).
MODES = (("online", False, False, False), ("online + n=M", False, True, False), ("batch", True, False, False),
         ("batch + n=M", True, True, False), ("batch + n=M + logprobs", True, True, True))


def _mode_counts(p: Part, n_in_one: bool, logprobs: bool):
    """(requests, input tokens, output tokens) of one part in one mode."""
    if logprobs and p.kind in ("ab", "compare"):
        # one request per form, one output token: its top log-probabilities give the likelihood
        return p.prompts, p.input_tokens, p.prompts * 1.0
    per = p.samples * p.attempts
    if n_in_one and p.samples > 1:
        return p.prompts * p.attempts, p.input_tokens * p.attempts, p.prompts * per * p.output_tokens
    return p.prompts * per, p.input_tokens * per, p.prompts * per * p.output_tokens


def estimate_table(parts, price: Price | None, modes=MODES, model: str = "") -> pd.DataFrame:
    """One row per mode: requests, input and output tokens, and cost (``NaN`` without a price).

    Examples
    --------
    >>> parts = [Part("moralchoice-low", "ab", 2, 5, 300, 1.5), Part("moralchoice-low", "repeat", 2, 5, 320, 10.0)]
    >>> t = estimate_table(parts, price_for("m", price_in=1.0, price_out=4.0))
    >>> t[["mode", "requests", "input_tokens", "output_tokens"]].values.tolist()[::2]
    [['online', 20, 3100, 115], ['batch', 20, 3100, 115], ['batch + n=M + logprobs', 4, 620, 102]]
    """
    rows = []
    for name, batch, n_in_one, logprobs in modes:
        req = tin = tout = 0.0
        for p in parts:
            r, i, o = _mode_counts(p, n_in_one, logprobs)
            req, tin, tout = req + r, tin + i, tout + o
        rows.append(dict(model=model, mode=name, requests=int(round(req)), input_tokens=int(round(tin)),
                         output_tokens=int(round(tout)),
                         cost_usd=price.cost(tin, tout, batch=batch) if price is not None else float("nan")))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- during a run


def records_usage(records) -> tuple[int, int, int]:
    """(input tokens, output tokens, responses without a count) over a run's records.

    Attempts and error records alike: an error record with a token count was a response the server
    billed (e.g. an answer the parser could not read).
    """
    tin = tout = unknown = 0
    for r in records:
        if r.get("kind", "attempt") == "attempt" or r.get("prompt_tokens") is not None:
            if r.get("prompt_tokens") is None and r.get("kind", "attempt") == "attempt":
                unknown += 1
            tin += int(r.get("prompt_tokens") or 0)
            tout += int(r.get("completion_tokens") or 0)
    return tin, tout, unknown


@dataclass
class CostMeter:
    """Tokens and dollars of one run while it is collected; a budget and a tokens-per-minute pace.

    Attach it to a backend (``backend.cost_meter = CostMeter(...)``); :func:`moralkit.collect.runner.run_tasks`
    then calls :meth:`begin` with the run's stored records, :meth:`admit` before each request and
    :meth:`settle` with each response.

    Parameters
    ----------
    price : Price, optional
        Without one, tokens are counted but no cost is known (``max_cost`` then needs one).
    max_cost : float, optional
        Dollars the whole run (every session, the records already stored included) may cost. A request
        is sent only if the cost so far, plus the worst case of the requests in flight and of this one
        (its estimated prompt and its whole ``max_tokens`` of output), stays within it.
    tpm : int, optional
        Tokens per minute (prompt + ``max_tokens`` of each request), paced with
        :class:`aiolimiter.AsyncLimiter` (pool backends).
    counter : TokenCounter, optional
        How a request's prompt tokens are estimated before it is sent (default: the committed runs'
        calibration).
    """

    price: Price | None = None
    max_cost: float | None = None
    tpm: int | None = None
    counter: TokenCounter | None = None
    spent_before: float = field(default=0.0, init=False)
    session_cost: float = field(default=0.0, init=False)
    reserved: float = field(default=0.0, init=False)
    next_cost: float = field(default=0.0, init=False)

    def __post_init__(self):
        if self.max_cost is not None:
            if not float(self.max_cost) > 0:
                raise MoralkitError(f"--max-cost must be > 0 dollars, got {self.max_cost}")
            if self.price is None:
                raise MoralkitError("--max-cost needs a price: the genai-prices table does not know this model; give "
                                    "--price-in and --price-out (dollars per million input and output tokens)")
        if self.tpm is not None:
            check_int(self.tpm, "--tpm (tokens per minute)", minimum=1)
        self.counter = self.counter or TokenCounter()
        self._pending: dict = {}

    def begin(self, records) -> None:
        """Start (or continue) a phase of a session: what the run's stored records cost so far."""
        tin, tout, _ = records_usage(records)
        self.spent_before = self.price.cost(tin, tout) if self.price else 0.0
        self.session_cost = 0.0
        self.reserved = 0.0
        self._pending = {}

    @property
    def spent(self) -> float:
        """Dollars of the run so far (stored records, this phase's responses)."""
        return self.spent_before + self.session_cost

    def worst_case(self, request) -> tuple[int, float]:
        """(estimated tokens, worst-case dollars) of one request: its prompt and all of ``max_tokens``."""
        n_in = self.counter.count(request.messages)
        n_out = int(request.sampling.max_tokens)
        return n_in + n_out, (self.price.cost(n_in, n_out) if self.price else 0.0)

    def admit(self, request) -> bool:
        """Whether ``request`` may be sent within the budget; reserves its worst case if so."""
        if self.max_cost is None:
            return True
        _, c = self.worst_case(request)
        if self.spent + self.reserved + c > float(self.max_cost) + 1e-12:
            self.next_cost = c
            return False
        self.reserved += c
        self._pending[id(request)] = c
        return True

    def settle(self, request, completion) -> None:
        """Replace a request's reservation by what the server billed."""
        self.reserved -= self._pending.pop(id(request), 0.0)
        if self.price is not None and (completion.prompt_tokens or completion.completion_tokens):
            self.session_cost += self.price.cost(completion.prompt_tokens or 0, completion.completion_tokens or 0)

    def stop_message(self) -> str:
        return (f"budget: the next request (up to {format_usd(self.next_cost)}) could take this run over --max-cost "
                f"{format_usd(float(self.max_cost))} (spent {format_usd(self.spent)}, up to "
                f"{format_usd(self.reserved)} in flight); raise --max-cost to continue")

    def tpm_limiter(self):
        """An :class:`aiolimiter.AsyncLimiter` of ``tpm`` tokens per 60 s (``None`` without ``tpm``); create
        it inside the event loop that uses it."""
        if not self.tpm:
            return None
        from aiolimiter import AsyncLimiter

        return AsyncLimiter(int(self.tpm), 60.0)


# --------------------------------------------------------------------------- the estimate command


def survey_parts(survey: str, counter: TokenCounter, *, system=None, limit=None, ambiguity=None, scenarios=None,
                 n_scenarios=None, scenario_seed: int = 0, samples=None, question_types=None, max_tokens=None,
                 output_tokens=None, source=None) -> list[Part]:
    """The requests of ``survey``: ``"psm"``, ``"moralchoice"`` (one ``ambiguity``), or ``"paper"`` (the PSM
    and MoralChoice low and high on every scenario at the paper's M). ``output_tokens`` overrides the
    committed runs' mean answer length."""
    check_choice(survey, ("psm", "moralchoice", "paper"), "survey")
    if survey == "psm":
        parts = psm_parts(counter, system=system, limit=limit, max_tokens=int(max_tokens or 16))
    elif survey == "moralchoice":
        check_choice(ambiguity, ("low", "high", "controversial"), "MoralChoice's ambiguity")
        parts = moralchoice_parts(counter, ambiguity, scenarios=scenarios, n_scenarios=n_scenarios,
                                  scenario_seed=scenario_seed, samples=samples, question_types=question_types,
                                  max_tokens=max_tokens, source=source)
    else:  # "paper"
        parts = psm_parts(counter) + moralchoice_parts(counter, "low", source=source) + \
            moralchoice_parts(counter, "high", source=source)
    if output_tokens is not None:
        for p in parts:
            p.output_tokens = float(output_tokens)
    return parts


def counter_for(model, backend: str = "openai") -> TokenCounter:
    """The model's own tokenizer for the transformers backend (when it loads), else the calibration."""
    if backend == "transformers":
        try:
            return TokenCounter.for_local_model(model)
        except Exception:  # not installed, no tokenizer offline: fall back to the committed runs' measures
            pass
    return TokenCounter()


def markdown_table(df: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (integers with thousands separators, dollars formatted)."""
    def cell(c, v):
        if c.startswith("cost"):
            return format_usd(v)
        if isinstance(v, (int,)) and not isinstance(v, bool):
            return f"{v:,}"
        return "" if v is None else str(v)

    cols = list(df.columns)
    lines = ["| " + " | ".join(c.replace("_", " ") for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(c, v) for c, v in zip(cols, row)) + " |")
    return "\n".join(lines)


def estimate_markdown(models, survey: str = "paper", *, backend: str = "openai", provider=None, price_in=None,
                      price_out=None, output_tokens=None, **kw) -> str:
    """The text of ``moralkit estimate``: per model, its price and how tokens were counted, then one row
    per mode (:data:`MODES`)."""
    out = []
    for model in models:
        counter = counter_for(model, backend)
        parts = survey_parts(survey, counter, output_tokens=output_tokens, **kw)
        price = price_for(model, provider, price_in=price_in, price_out=price_out)
        t = estimate_table(parts, price, model=model)
        ptxt = ("no price (not in the genai-prices table; give --price-in and --price-out)" if price is None else
                f"price {format_usd(price.input_mtok)} in / {format_usd(price.output_mtok)} out per million tokens "
                f"(batch {format_usd(price.batch_input_mtok)} / {format_usd(price.batch_output_mtok)}), "
                f"{price.source}")
        what = {"paper": "PSM 161 prompts + MoralChoice 687 low (M = 5) + 679 high (M = 10) scenarios x 6 forms"}.get(
            survey, survey)
        out.append(f"**{model}** ({what}): {ptxt}; tokens {counter.method}.\n\n"
                   + markdown_table(t.drop(columns="model")))
    out.append("Modes: n=M sends a MoralChoice form once with n = M (the prompt is billed once); logprobs asks the "
               "A/B and compare forms for 1 output token with its log-probabilities (the repeat form is sampled); "
               "the PSM is sent once per round (a round without a valid answer is re-sent, up to 3 attempts: not "
               "counted here).")
    return "\n\n".join(out)
