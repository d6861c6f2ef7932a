"""The collecting commands: ``collect psm``, ``collect moralchoice`` and ``likelihood``.

Each ``register_*`` function adds its subparser (options in :mod:`moralkit.cli.options`); each ``cmd_*``
runs it: the backend from :mod:`moralkit.cli.backends`, the collection from :mod:`moralkit.collect`.
"""

from __future__ import annotations

from moralkit.errors import MoralkitError

from .backends import apply_persona, backend_from_args, collect_backend, dry_run, sampling_from_args
from .options import NONNEG_INT, POS_INT, add_backend_args, add_batch_args, int_in

__all__ = ["register_collect", "register_likelihood", "cmd_collect_psm", "cmd_collect_moralchoice", "cmd_likelihood"]


def register_collect(sub) -> None:
    """Add ``collect`` and its subcommands ``psm`` and ``moralchoice`` to the subparsers ``sub``."""
    c = sub.add_parser("collect", help="administer a survey to an LLM", allow_abbrev=False)
    csub = c.add_subparsers(dest="survey", required=True)
    ps = csub.add_parser("psm", help="Priced Survey Methodology (Seror 2025, Section 2.1)", allow_abbrev=False)
    add_backend_args(ps)
    ps.add_argument("--design-seed", type=int, default=0)
    ps.add_argument("--order", choices=["paper", "shuffled"], default="paper")
    ps.add_argument("--attempts", type=POS_INT, default=3)
    ps.add_argument("--limit", type=NONNEG_INT, default=None, help="only the first N constrained rounds")
    add_batch_args(ps)
    ps.set_defaults(func=cmd_collect_psm)
    mc = csub.add_parser("moralchoice", help="MoralChoice (Scherrer et al. 2023, Section 3.3)", allow_abbrev=False)
    add_backend_args(mc)
    mc.add_argument("--ambiguity", choices=["low", "high"], required=True)
    mc.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all or --n-scenarios)")
    mc.add_argument("--n-scenarios", type=POS_INT, default=None, help="a seeded random subset of this size")
    mc.add_argument("--scenario-seed", type=int, default=0)
    mc.add_argument("--samples", type=POS_INT, default=None, help="M samples per question form (paper: 5 low, 10 high)")
    mc.add_argument("--question-types", default=None, help="subset of ab,compare,repeat")
    mc.add_argument("--order", choices=["table", "shuffled"], default="table",
                    help="scenario order: the survey table's (grouped by rule) or seeded random (--scenario-seed), "
                         "so that a run stopped early holds a random subset of complete scenarios")
    mc.add_argument("--limit", type=NONNEG_INT, default=None,
                    help="complete at most N more scenarios in this session (the next ones in --order)")
    mc.add_argument("--samples-per-request", type=int, default=1,
                    help="ask k of the M samples in one request (OpenAI-style n = k): the prompt is sent and paid "
                         "once, with one seed per request instead of one per sample (default 1: one request per "
                         "sample, as before)")
    add_batch_args(mc)
    mc.set_defaults(func=cmd_collect_moralchoice)


def register_likelihood(sub) -> None:
    """Add ``likelihood`` (MoralChoice action likelihoods from token probabilities) to the subparsers ``sub``."""
    lk = sub.add_parser("likelihood", help="MoralChoice action likelihoods from token probabilities, not samples: "
                                            "exact (local transformers models, or a server that returns vLLM's "
                                            "prompt_logprobs) or from an API's top_logprobs (--estimator top_logprobs); "
                                            "Scherrer et al. 2023, Definition 1",
                        allow_abbrev=False)
    add_backend_args(lk)
    lk.add_argument("--ambiguity", choices=["low", "high"], required=True)
    lk.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all)")
    lk.add_argument("--n-scenarios", type=POS_INT, default=None, help="a seeded random subset of this size")
    lk.add_argument("--scenario-seed", type=int, default=0)
    lk.add_argument("--question-types", default=None, help="subset of ab,compare,repeat")
    lk.add_argument("--answers", choices=["canonical", "templates"], default="canonical",
                    help="canonical answer set (moralkit.moralchoice.likelihood)")
    lk.add_argument("--order", choices=["overlap-first", "table"], default="overlap-first")
    lk.add_argument("--estimator", choices=["token_probability", "top_logprobs"], default="token_probability",
                    help="token_probability (default): exact likelihoods of the canonical answers (a local model, or "
                         "a server with prompt_logprobs). top_logprobs: one request per A/B and yes/no form asking "
                         "for 1 token and its top_logprobs, from any OpenAI-compatible API that returns them "
                         "(OpenAI's non-reasoning chat models, vLLM, Together, moralkit serve); the repeat form "
                         "cannot be scored so and is SAMPLED instead (--samples per ordering; rows with estimator "
                         "'sampling')")
    lk.add_argument("--samples", type=POS_INT, default=None,
                    help="with --estimator top_logprobs: samples of each repeat form (default the paper's M: 5 low, "
                         "10 high)")
    lk.add_argument("--top-logprobs", type=int_in(1, 20), default=None,
                    help="with --estimator top_logprobs: alternatives asked for per request (default 20, OpenAI's "
                         "maximum)")
    lk.add_argument("--limit", type=NONNEG_INT, default=None, help="score at most N new scenarios in this session")
    lk.set_defaults(func=cmd_likelihood)


def cmd_collect_psm(a):
    apply_persona(a)
    from moralkit.collect.psm import psm_quality, run_psm

    if a.dry_run:
        return dry_run(a, "psm")
    b = collect_backend(a, 1)
    ds, rep = run_psm(b, a.out, label=a.label, design_seed=a.design_seed, seed=a.seed, order=a.order,
                      sampling=sampling_from_args(a, 16, b), system=a.system, max_attempts=a.attempts, limit=a.limit,
                      progress=not a.no_progress, export=a.export, return_report=True)
    q = psm_quality(a.out)
    print(f"{ds.model}: {q['rounds']} constrained rounds completed, {q['answered']} answered, {q['missing']} "
          f"missing, {q['attempts']} attempts, statuses {dict(q['status'])}, q0={q['q0']}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line("rounds (incl. round 0)") + (f" [--limit {a.limit}]" if a.limit is not None else ""))


def cmd_collect_moralchoice(a):
    apply_persona(a)
    from moralkit.collect.moralchoice import MC_LINE, moralchoice_quality, run_moralchoice

    if a.dry_run:
        return dry_run(a, "moralchoice")
    b = collect_backend(a, 8)
    qt = tuple(a.question_types.split(",")) if a.question_types else None
    df, rep = run_moralchoice(b, a.out, ambiguity=a.ambiguity, label=a.label, scenarios=a.scenarios,
                              n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed, samples=a.samples,
                              question_types=qt, sampling=sampling_from_args(a, 8, b), max_tokens=a.max_tokens, seed=a.seed,
                              system=a.system, order=a.order, limit=a.limit, progress=not a.no_progress,
                              export=a.export, return_report=True, samples_per_request=a.samples_per_request)
    q = moralchoice_quality(a.out)
    print(f"{len(df)} answers; decisions {q['decision']}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line(*MC_LINE))


def cmd_likelihood(a):
    from moralkit.collect.likelihood_run import LIKELIHOOD_LINE, run_likelihood

    top = a.estimator == "top_logprobs"
    if a.backend == "anthropic":
        raise MoralkitError("likelihood needs token log-probabilities; Anthropic's Messages API returns none "
                            "(use --backend transformers, or openai with a server that returns them)")
    if top and a.backend != "openai":
        raise MoralkitError("--estimator top_logprobs asks an OpenAI-compatible API (--backend openai); for a local "
                            "model use the exact --estimator token_probability")
    if a.dry_run:
        raise MoralkitError("--dry-run estimates sampled collections (collect psm|moralchoice); likelihoods are "
                            "priced by `python -m moralkit estimate` (its log-probabilities mode)")
    if a.temperature != 1.0 or a.top_p != 1.0 or a.top_k is not None:
        raise MoralkitError("likelihood estimates the model's own distribution at temperature 1 (Scherrer et al. "
                            "2023, Section 3.3): --temperature, --top-p and --top-k do not apply")
    if not top and (a.samples is not None or a.top_logprobs is not None):
        raise MoralkitError("--samples and --top-logprobs apply to --estimator top_logprobs only")
    b = backend_from_args(a, 1)
    qt = tuple(a.question_types.split(",")) if a.question_types else None
    kw = dict(samples=a.samples, top_logprobs=a.top_logprobs or 20, seed=a.seed) if top else {}
    df, rep = run_likelihood(b, a.out, ambiguity=a.ambiguity, persona=a.persona or "none", label=a.label,
                             scenarios=a.scenarios, n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed,
                             answers=a.answers, question_types=qt, order=a.order, limit=a.limit,
                             progress=not a.no_progress, export=a.export, return_report=True, estimator=a.estimator,
                             **kw)
    n = df["scenario_id"].nunique() if len(df) else 0
    print(f"{n} scenarios x forms = {len(df)} rows; mean covered mass {df['covered'].mean() if n else float('nan'):.4f}")
    if top and (qt is None or "repeat" in qt):
        from moralkit.collect.logprob_api import REPEAT_FALLBACK

        print(f"estimators: ab and compare from top_logprobs; {REPEAT_FALLBACK}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line(*LIKELIHOOD_LINE["api" if b.name == "openai" else "tree"]))

