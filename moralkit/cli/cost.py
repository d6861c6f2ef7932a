"""``estimate``: requests, tokens and cost of a collection before it runs (:mod:`moralkit.collect.cost`)."""

from __future__ import annotations

from moralkit.errors import MoralkitError

from .options import add_cost_args

__all__ = ["register_estimate", "cmd_estimate"]


def register_estimate(sub) -> None:
    """Add ``estimate`` to the subparsers ``sub``."""
    es = sub.add_parser("estimate", allow_abbrev=False,
                        help="requests, input and output tokens and cost of a collection before it runs, in each mode "
                             "(online, n = M, batch, log-probabilities); nothing is sent")
    es.add_argument("--survey", choices=["paper", "psm", "moralchoice"], default="paper",
                    help="paper: PSM (161 prompts) + MoralChoice low (687 scenarios, M = 5) and high (679, M = 10)")
    es.add_argument("--model", action="append", default=[], help="API model name (repeat for several)")
    es.add_argument("--backend", choices=["openai", "anthropic", "transformers"], default="openai",
                    help="transformers: count tokens with the local model's tokenizer")
    es.add_argument("--provider", default=None, help="organisation, to pick the price table's entry (OpenAI, Anthropic)")
    es.add_argument("--ambiguity", choices=["low", "high"], default=None, help="with --survey moralchoice")
    es.add_argument("--n-scenarios", type=int, default=None, help="with --survey moralchoice (default: all)")
    es.add_argument("--samples", type=int, default=None, help="M (default: the paper's, 5 low, 10 high)")
    es.add_argument("--output-tokens", type=float, default=None,
                    help="output tokens per answer (default: the committed runs' mean per kind of prompt; "
                         "reasoning models spend more)")
    es.add_argument("--sweep", default=None, help="estimate every model x survey of a sweep file instead")
    add_cost_args(es, collect=False)
    es.set_defaults(func=cmd_estimate)


def cmd_estimate(a):
    from moralkit.collect.cost import estimate_markdown

    if a.sweep:
        from moralkit.collect.sweep import estimate_sweep

        print(estimate_sweep(a.sweep))
        return
    if not a.model:
        raise MoralkitError("give one or more --model NAME (or --sweep FILE)")
    kw = {}
    if a.survey == "moralchoice":
        if a.ambiguity is None:
            raise MoralkitError("--survey moralchoice needs --ambiguity low or high")
        kw = dict(ambiguity=a.ambiguity, n_scenarios=a.n_scenarios, samples=a.samples)
    print(estimate_markdown(a.model, a.survey, backend=a.backend, provider=a.provider, price_in=a.price_in,
                            price_out=a.price_out, output_tokens=a.output_tokens, **kw))

