"""Command line: ``python -m moralkit collect psm|moralchoice ...``, ``likelihood``, ``export``, ``repair``, ``runs``, ``findings``,
``models``, ``cache``, ``serve``.

Exit status: 0 done; 2 bad input, damaged data, or a collection the server refused (a 400/422 naming
the rejected parameter and the flag that changes it, HTTP 401 wrong key, 403, 404 unknown model: its
redacted message is printed; the message names the fix); 3 a collection ended with tasks undone (its
completeness line and the failing requests are printed; re-run to resume); 4 the run directory is in use
by another collector. Invalid option values are refused before anything runs. Whatever is printed on
stderr, tracebacks included, passes through the secret filter (:mod:`moralkit.collect.secrets`).

Examples
--------
Collect the PSM from the default offline model (resumes if the run directory exists)::

    python -m moralkit collect psm --backend transformers --model qwen2.5-coder-0.5b-instruct \\
        --out data/raw/psm-qwen2.5-coder-0.5b-instruct-t1-s0 --temperature 1.0 --seed 0

From an API (key in the environment variable named by --api-key-env)::

    OPENAI_API_KEY=... python -m moralkit collect psm --backend openai --model gpt-4o-mini \\
        --out runs/psm-gpt-4o-mini --concurrency 8 --rpm 500
    ANTHROPIC_API_KEY=... python -m moralkit collect psm --backend anthropic --model claude-sonnet-4-6 \\
        --out runs/psm-claude-sonnet-4-6
"""

from __future__ import annotations

import argparse
import math
import sys

from moralkit import __version__
from moralkit.errors import MoralkitError


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors never echo values: an unknown option's value may be a key."""

    def error(self, message):
        if message.startswith("unrecognized arguments:"):
            names = [t.split("=", 1)[0] for t in message.split(":", 1)[1].split() if t.startswith("-")]
            message = ("unrecognized arguments: " + (" ".join(names) or "(positional values)")
                       + " (values are not shown; no option takes an API key: put it in an environment variable "
                         "and pass its name with --api-key-env)")
        super().error(message)


def _number(kind, lo=None, lo_open=False, hi=None, what=""):
    """An argparse type: a finite int/float within bounds (refused at parse time, with the rule)."""
    def conv(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return v
    conv.__name__ = kind.__name__
    return conv


_POS_INT = _number(int, 1, what="an integer >= 1")
_NONNEG_INT = _number(int, 0, what="an integer >= 0")


def _base_url(text):
    """argparse type of --base-url: an http(s) URL without credentials (never echoed)."""
    from moralkit.collect.secrets import check_base_url
    from moralkit.errors import MoralkitError

    try:
        return check_base_url(text)
    except MoralkitError as e:
        raise argparse.ArgumentTypeError(str(e).replace("base_url (--base-url) ", "")) from None


def _new_file(text):
    """argparse type of an output file: not an existing directory."""
    from pathlib import Path

    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name, e.g. {Path(text) / 'NAME.csv.gz'}")
    return text


def _run_dir(text):
    """argparse type of a run directory to write: not an existing file."""
    from pathlib import Path

    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a run directory; give a directory (a new one for a "
                                         "new run, or the directory of the run to resume)")
    return text


def _int_in(lo, hi):
    """An argparse type: an integer in [lo, hi] (refused at parse time otherwise)."""

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {v}")
        return v

    return parse


def _seconds(text):
    """An argparse type: a finite number of seconds > 0."""
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (0 < v < math.inf):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return v


def _add_backend_args(p):
    g = p.add_argument_group("backend")
    g.add_argument("--backend", choices=["transformers", "openai", "anthropic"], default="transformers",
                   help="transformers: a local model; openai: OpenAI's API or any OpenAI-compatible server "
                        "(--base-url); anthropic: Anthropic's Messages API (see the README's table of providers)")
    g.add_argument("--model", default=None,
                   help="registry name (see `python -m moralkit models`), .gguf file, local directory, hub id, "
                        "or the API model name (default: qwen2.5-coder-0.5b-instruct)")
    g.add_argument("--gguf-file", default=None, help="GGUF file inside --model (a directory or hub repo)")
    g.add_argument("--device", default="auto")
    g.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    g.add_argument("--threads", type=_POS_INT, default=None, help="torch CPU threads")
    g.add_argument("--batch-size", type=_POS_INT, default=None, help="requests per forward pass / batch")
    g.add_argument("--base-url", type=_base_url, default=None,
                   help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (no credentials: the key goes in "
                        "the environment variable named by --api-key-env)")
    g.add_argument("--api-key-env", default=None,
                   help="NAME of the environment variable holding the key (default OPENAI_API_KEY, or "
                        "ANTHROPIC_API_KEY with --backend anthropic; the key itself is never an option, and is never "
                        "written or printed)")
    g.add_argument("--max-tokens-param", choices=["auto", "max_tokens", "max_completion_tokens"], default="auto",
                   help="openai: the name the output budget is sent under; auto: max_completion_tokens for OpenAI's "
                        "reasoning models (o-series, GPT-5), else max_tokens, switching once if the server asks for "
                        "max_completion_tokens")
    g.add_argument("--no-seed", action="store_true", help="openai: do not send the seed (servers that refuse it)")
    g.add_argument("--anthropic-version", default=None,
                   help="anthropic: the anthropic-version header (default: the SDK's, 2026-10-21, which takes no "
                        "temperature/top_p/top_k); 2023-06-01 sends them")
    g.add_argument("--concurrency", type=_POS_INT, default=4, help="requests in flight (openai)")
    g.add_argument("--rpm", type=_POS_INT, default=None, help="requests-per-minute cap (openai)")
    g.add_argument("--timeout", type=_number(float, 0, lo_open=True, what="a number of seconds > 0"), default=60.0)
    g.add_argument("--max-retries", type=_NONNEG_INT, default=6,
                   help="failed tries of one request before it is left undone for this session (openai)")
    g.add_argument("--backoff", type=_number(float, 0, what="a number of seconds >= 0"), default=1.0,
                   help="base of the exponential backoff between retries, seconds (jittered; Retry-After honoured)")
    s = p.add_argument_group("sampling")
    s.add_argument("--temperature", type=_number(float, 0, what="a finite number >= 0"), default=1.0)
    s.add_argument("--top-p", type=_number(float, 0, lo_open=True, hi=1, what="a number in (0, 1]"), default=1.0)
    s.add_argument("--top-k", type=_NONNEG_INT, default=None,
                   help="top-k sampling: local models; sent in the body to OpenAI-compatible servers (vLLM, Together, "
                        "OpenRouter, llama.cpp) and to Anthropic (--anthropic-version 2023-06-01); refused for "
                        "OpenAI's API, which has none")
    s.add_argument("--max-tokens", type=_POS_INT, default=None,
                   help="output budget per answer (default: the survey's, 16 for the PSM, 8 for MoralChoice; 16384 for "
                        "reasoning models, whose hidden reasoning counts against it)")
    s.add_argument("--reasoning-effort", default=None,
                   help="reasoning effort of a reasoning model (OpenAI: none, minimal, low, medium, high, xhigh; "
                        "Anthropic: low, medium, high, xhigh, max, sent as output_config.effort); default: the "
                        "model's own")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--system", default=None, help="system message (default: none)")
    s.add_argument("--persona", default=None,
                   help="a named system-prompt persona (moralkit.collect.personas: none, utilitarian, "
                        "deontological, care, virtue); the label gains '+persona-<name>'")
    p.add_argument("--label", default=None, help="respondent label in the exported data (default: model name)")
    p.add_argument("--out", type=_run_dir, required=True,
                   help="run directory (records.jsonl, manifest.json); re-run to resume")
    p.add_argument("--export", type=_new_file, default=None, help="tidy .csv.gz to write at the end")
    p.add_argument("--no-progress", action="store_true")
    _add_cost_args(p)


def _add_cost_args(p, collect=True):
    g = p.add_argument_group("cost (moralkit.collect.cost)")
    g.add_argument("--price-in", type=float, default=None,
                   help="dollars per million input tokens (default: the genai-prices table's price of --model)")
    g.add_argument("--price-out", type=float, default=None, help="dollars per million output tokens (with --price-in)")
    if collect:
        g.add_argument("--max-cost", type=float, default=None,
                       help="dollars this run may cost in all (stored records included): the run stops cleanly, "
                            "resumable, before a request that could cross it (exit status 3)")
        g.add_argument("--tpm", type=int, default=None, help="tokens-per-minute cap (openai; prompt + max tokens)")
        g.add_argument("--dry-run", action="store_true",
                       help="print the estimate of this collection (requests, tokens, cost by mode) and send nothing")


def _meter(a, b):
    """Attach the cost meter of ``--max-cost``, ``--tpm`` and the price to backend ``b``."""
    from moralkit.collect.cost import CostMeter, price_for

    price = price_for(getattr(b, "remote_model", None) or b.model, price_in=a.price_in, price_out=a.price_out) \
        if (a.backend != "transformers" or a.price_in is not None) else None
    b.cost_meter = CostMeter(price=price, max_cost=a.max_cost, tpm=a.tpm)
    return b


def _dry_run(a, survey):
    """``collect ... --dry-run``: the estimate of this collection, by mode; nothing is sent."""
    from moralkit.collect.cost import estimate_markdown
    from moralkit.collect.localmodels import DEFAULT_MODEL

    kw = dict(system=a.system, limit=a.limit) if survey == "psm" else dict(
        ambiguity=a.ambiguity, scenarios=a.scenarios, n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed,
        samples=a.samples, question_types=tuple(a.question_types.split(",")) if a.question_types else None,
        max_tokens=a.max_tokens)
    print(estimate_markdown([a.model or DEFAULT_MODEL], survey, backend=a.backend, price_in=a.price_in,
                            price_out=a.price_out, **kw))


def _backend(a, default_batch):
    from moralkit.collect.backends import make_backend
    from moralkit.collect.localmodels import DEFAULT_MODEL
    from moralkit.errors import MoralkitError

    model = a.model or DEFAULT_MODEL
    if a.backend == "transformers":
        return _meter(a, make_backend("transformers", model, gguf_file=a.gguf_file, device=a.device, dtype=a.dtype,
                                      batch_size=a.batch_size or default_batch, threads=a.threads))
    if a.model is None:
        from moralkit.errors import MoralkitError

        raise MoralkitError(f"--model is required with --backend {a.backend} (the model name the API knows)")
    common = dict(base_url=a.base_url, api_key_env=a.api_key_env, concurrency=a.concurrency, rpm=a.rpm,
                  timeout=a.timeout, max_retries=a.max_retries, backoff=a.backoff)
    if a.backend == "anthropic":
        return _meter(a, make_backend("anthropic", model, api_version=a.anthropic_version, **common))
    return _meter(a, make_backend("openai", model, send_seed=not a.no_seed, max_tokens_param=a.max_tokens_param,
                                  reasoning=True if a.reasoning_effort else None, **common))


def _add_batch_args(p):
    g = p.add_argument_group("batch APIs and the response cache (moralkit.collect.batch, moralkit.collect.cache)")
    g.add_argument("--batch", action="store_true",
                   help="send the requests through the provider's batch API (--backend openai: files + batches; "
                        "anthropic: message batches): about half the price, results within 24 h; resumable")
    g.add_argument("--wait", type=_number(float, 0, what="a number of seconds >= 0"), default=None,
                   help="with --batch: stop waiting after this many seconds (exit status 3; re-run to resume); "
                        "default: until every batch has ended. Ctrl-C stops waiting too")
    g.add_argument("--poll-interval", type=_number(float, 0, lo_open=True, what="a number of seconds > 0"),
                   default=30.0, help="with --batch: seconds between polls")
    g.add_argument("--cache", action="store_true",
                   help="use the response cache across runs (python -m moralkit cache): a request identical in "
                        "every sent field to one answered before is answered from it, without sending")


def _collect_backend(a, default_batch):
    """The backend of a collection: online, a batch API (--batch), with the response cache (--cache)."""
    cache = None
    if getattr(a, "cache", False):
        from moralkit.collect.cache import ResponseCache

        cache = ResponseCache()
    if getattr(a, "batch", False):
        from moralkit.collect.batch import BatchBackend

        env = a.api_key_env or ("ANTHROPIC_API_KEY" if a.backend == "anthropic" else "OPENAI_API_KEY")
        return BatchBackend(a.backend, a.model, base_url=a.base_url, api_key_env=env, wait=a.wait,
                            poll_interval=a.poll_interval, max_retries=min(a.max_retries, 3), cache=cache,
                            timeout=max(a.timeout, 120.0))
    if a.wait is not None:
        raise MoralkitError("--wait applies to --batch collections only")
    b = _backend(a, default_batch)
    if cache is not None:
        from moralkit.collect.cache import CachedBackend

        b = CachedBackend(b, cache)
    return b


def _sampling(a, default_max, backend=None):
    from moralkit.collect.backends import Sampling, survey_max_tokens

    return Sampling(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
                    max_tokens=a.max_tokens or survey_max_tokens(backend, default_max),
                    reasoning_effort=a.reasoning_effort)


def _apply_persona(a):
    """Turn ``--persona`` into the system message and the respondent label."""
    if a.persona is None:
        return
    from moralkit.collect.localmodels import DEFAULT_MODEL
    from moralkit.collect.personas import get_persona, persona_label
    from moralkit.errors import MoralkitError

    p = get_persona(a.persona)
    if a.system is not None:
        raise MoralkitError("give either --persona or --system, not both")
    a.system = p.system
    a.label = persona_label(a.label or a.model or DEFAULT_MODEL, p.name)


def cmd_collect_psm(a):
    _apply_persona(a)
    from moralkit.collect.psm import psm_quality, run_psm

    if a.dry_run:
        return _dry_run(a, "psm")
    b = _collect_backend(a, 1)
    ds, rep = run_psm(b, a.out, label=a.label, design_seed=a.design_seed, seed=a.seed, order=a.order,
                      sampling=_sampling(a, 16, b), system=a.system, max_attempts=a.attempts, limit=a.limit,
                      progress=not a.no_progress, export=a.export, return_report=True)
    q = psm_quality(a.out)
    print(f"{ds.model}: {q['rounds']} constrained rounds completed, {q['answered']} answered, {q['missing']} "
          f"missing, {q['attempts']} attempts, statuses {dict(q['status'])}, q0={q['q0']}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line("rounds (incl. round 0)") + (f" [--limit {a.limit}]" if a.limit is not None else ""))


def cmd_collect_moralchoice(a):
    _apply_persona(a)
    from moralkit.collect.moralchoice import MC_LINE, moralchoice_quality, run_moralchoice

    if a.dry_run:
        return _dry_run(a, "moralchoice")
    b = _collect_backend(a, 8)
    qt = tuple(a.question_types.split(",")) if a.question_types else None
    df, rep = run_moralchoice(b, a.out, ambiguity=a.ambiguity, label=a.label, scenarios=a.scenarios,
                              n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed, samples=a.samples,
                              question_types=qt, sampling=_sampling(a, 8, b), max_tokens=a.max_tokens, seed=a.seed,
                              system=a.system, order=a.order, limit=a.limit, progress=not a.no_progress,
                              export=a.export, return_report=True, samples_per_request=a.samples_per_request)
    q = moralchoice_quality(a.out)
    print(f"{len(df)} answers; decisions {q['decision']}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line(*MC_LINE))


def cmd_likelihood(a):
    from moralkit.collect.likelihood_run import LIKELIHOOD_LINE, run_likelihood
    from moralkit.errors import MoralkitError

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
    b = _backend(a, 1)
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


def cmd_export(a):
    from moralkit.collect.store import distinct_runs, read_manifest
    from moralkit.errors import DataError

    distinct_runs(a.run_dirs)
    surveys = {d: read_manifest(d).get("survey") for d in a.run_dirs}
    survey = surveys[a.run_dirs[0]]
    if len(set(surveys.values())) > 1:
        raise DataError("one export holds one survey; the runs given are of " +
                        ", ".join(f"{d}: {v}" for d, v in surveys.items()))
    if survey == "psm":
        from moralkit.collect.psm import export_psm

        print(export_psm(a.run_dirs, a.out))
    elif survey == "moralchoice-likelihood":
        from moralkit.collect.likelihood_run import export_likelihood

        print(export_likelihood(a.run_dirs, a.out))
    else:
        from moralkit.collect.moralchoice import export_moralchoice

        print(export_moralchoice(a.run_dirs, a.out))


def cmd_repair(a):
    from moralkit.collect.store import repair_run
    from moralkit.errors import DataError

    r = repair_run(a.run_dir, manifest_from=a.manifest_from)
    aside = "; set aside (nothing deleted): " + ", ".join(r["set_aside"]) if r["set_aside"] else "; nothing set aside"
    print(f"{a.run_dir}: {r['kept']} records kept, {r['fixed']} fixed in place, {r['quarantined']} lines moved to "
          f"quarantine.jsonl {r['reasons'] or ''}, {r['merged_from_gz']} merged from records.jsonl.gz{aside}"
          + (f"; manifest taken from {r['manifest_from']}" if r["manifest_from"] else ""))
    if r["problem"]:
        raise DataError(f"{a.run_dir} is still not resumable: {r['problem']}")
    print("The run is resumable: re-run the collection command to resume.")


def cmd_models(a):
    from moralkit.collect.localmodels import LOCAL_MODELS, local_model_available

    for m in LOCAL_MODELS.values():
        print(f"{m.name:32s} {m.upstream:36s} {m.licence:11s} {m.size / 1e6:7.0f} MB  "
              f"{'installed' if local_model_available(m.name) else 'not installed: ' + m.pip}")


def cmd_runs(a):
    from moralkit.collect.summary import find_runs, runs_markdown

    print(runs_markdown(find_runs(a.root, survey=a.survey)))


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


def cmd_sweep(a):
    from moralkit.collect.sweep import SweepIncompleteError, load_sweep, run_sweep, status_markdown, status_table

    batch = True if a.batch else None
    if a.status:
        print(status_markdown(status_table(load_sweep(a.file, batch=batch))))
        return
    table = run_sweep(a.file, only=a.only or None, progress=False if a.no_progress else None, batch=batch,
                      wait=a.wait, poll_interval=a.poll_interval)
    bad = table[table["state"] != "done"]
    if len(bad):
        raise SweepIncompleteError(bad, a.file, batch=a.batch)


def cmd_findings(a):
    from moralkit.studies.findings import findings_markdown

    print(findings_markdown(seed=a.seed), end="")


def cmd_cache(a):
    from moralkit.collect.cache import ResponseCache

    c = ResponseCache()
    if a.clear:
        n = c.clear()
        print(f"{c.path}: cleared {n} cached responses")
    st = c.stats()
    print(f"{st['path']}: {st['entries']} cached responses, {st['bytes'] / 1e6:.2f} MB")
    c.close()


def cmd_serve(a):
    from moralkit.collect.server import ServerLimits, check_host, serve

    check_host(a.host, a.allow_remote)  # before anything loads
    limits = ServerLimits(max_tokens=a.max_tokens_limit, default_max_tokens=min(256, a.max_tokens_limit),
                          max_prompt_tokens=a.max_prompt_tokens, max_body_bytes=a.max_body_bytes,
                          request_timeout=a.request_timeout, max_queue=a.max_queue, queue_timeout=a.queue_timeout)
    serve(a.model, host=a.host, port=a.port, dtype=a.dtype, batch_size=1, gguf_file=a.gguf_file,
          allow_remote=a.allow_remote, limits=limits, threads=a.threads)


_DESCRIPTION = ("Administer the PSM (Seror 2025) and MoralChoice (Scherrer et al. 2023) surveys to LLMs, "
                "and export, repair, list and summarise the runs. Exit status: 0 done; 2 bad input, damaged data "
                "or a collection the server refused; 3 a collection ended with tasks undone (re-run to resume); "
                "4 the run directory is in use.")


def _prog() -> str:
    """``moralkit`` when run as the console script, ``python -m moralkit`` when run as a module.

    Examples
    --------
    >>> import sys
    >>> _prog() in ("moralkit", "python -m moralkit")
    True
    """
    argv0 = sys.argv[0] if sys.argv else ""
    return "python -m moralkit" if argv0.endswith("__main__.py") or argv0 in ("-m", "-c", "") else "moralkit"


class _Formatter(argparse.HelpFormatter):
    """Help that shows each option's default (when it has one worth showing)."""

    def _get_help_string(self, action):
        h = action.help or ""
        if ("%(default)" not in h and action.default is not None and action.default is not False
                and action.default is not argparse.SUPPRESS
                and (action.option_strings or action.nargs in ("?", "*"))):
            h += " (default: %(default)s)"
        return h


#: Help of the options that several subcommands share (added where a subcommand's option has none).
_SHARED_HELP = {
    "--device": "torch device of a local model: auto, cpu, cuda, mps",
    "--dtype": "floating-point type of a local model's weights in memory",
    "--timeout": "seconds per API request before it counts as failed and is retried",
    "--temperature": "sampling temperature (the papers sample at 1, the APIs' default)",
    "--top-p": "nucleus sampling; sent only when below 1 (Anthropic's recent models refuse it with --temperature)",
    "--seed": "seed of the answers: each request's seed is derived from it, the task and the attempt",
    "--no-progress": "no progress bar",
    "--design-seed": "seed of the PSM design: the 160 rounds' option sets (the same seed gives the same prompts)",
    "--order": "the order in which the tasks are sent",
    "--attempts": "attempts per round until an answer parses (Seror 2025, Section 2.1: up to three)",
    "--ambiguity": "the MoralChoice scenarios: low or high ambiguity (Scherrer et al. 2023, Section 3.1)",
    "--scenario-seed": "seed of the scenario subset (--n-scenarios) and of --order shuffled",
    "--out": "where to write",
    "--survey": "only run directories of this survey",
    "--model": "the local model to serve: a name listed by `moralkit models`, a directory or a hub id",
    "--gguf-file": "GGUF file inside --model (a directory or hub repo)",
    "--host": "address to listen on (loopback only: the server has no authentication)",
    "--port": "port to listen on (0: any free port)",
    "run_dirs": "run directories (records.jsonl and manifest.json) of one respondent",
    "run_dir": "the run directory to repair",
}


def _finish(parser) -> None:
    """Give every parser the defaults-showing help, and every option without help its shared help."""
    parser.formatter_class = _Formatter
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                _finish(sp)
        elif not a.help and a.help is not argparse.SUPPRESS:
            key = a.option_strings[0] if a.option_strings else a.dest
            a.help = _SHARED_HELP.get(key)


def build_parser():
    # allow_abbrev=False everywhere: an abbreviation must never turn into another option (a key typed
    # as ``--api-key sk-...`` would otherwise be taken for ``--api-key-env`` and recorded)
    p = _Parser(prog=_prog(), description=_DESCRIPTION, allow_abbrev=False)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="administer a survey to an LLM", allow_abbrev=False)
    csub = c.add_subparsers(dest="survey", required=True)
    ps = csub.add_parser("psm", help="Priced Survey Methodology (Seror 2025, Section 2.1)", allow_abbrev=False)
    _add_backend_args(ps)
    ps.add_argument("--design-seed", type=int, default=0)
    ps.add_argument("--order", choices=["paper", "shuffled"], default="paper")
    ps.add_argument("--attempts", type=_POS_INT, default=3)
    ps.add_argument("--limit", type=_NONNEG_INT, default=None, help="only the first N constrained rounds")
    _add_batch_args(ps)
    ps.set_defaults(func=cmd_collect_psm)
    mc = csub.add_parser("moralchoice", help="MoralChoice (Scherrer et al. 2023, Section 3.3)", allow_abbrev=False)
    _add_backend_args(mc)
    mc.add_argument("--ambiguity", choices=["low", "high"], required=True)
    mc.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all or --n-scenarios)")
    mc.add_argument("--n-scenarios", type=_POS_INT, default=None, help="a seeded random subset of this size")
    mc.add_argument("--scenario-seed", type=int, default=0)
    mc.add_argument("--samples", type=_POS_INT, default=None, help="M samples per question form (paper: 5 low, 10 high)")
    mc.add_argument("--question-types", default=None, help="subset of ab,compare,repeat")
    mc.add_argument("--order", choices=["table", "shuffled"], default="table",
                    help="scenario order: the survey table's (grouped by rule) or seeded random (--scenario-seed), "
                         "so that a run stopped early holds a random subset of complete scenarios")
    mc.add_argument("--limit", type=_NONNEG_INT, default=None,
                    help="complete at most N more scenarios in this session (the next ones in --order)")
    mc.add_argument("--samples-per-request", type=int, default=1,
                    help="ask k of the M samples in one request (OpenAI-style n = k): the prompt is sent and paid "
                         "once, with one seed per request instead of one per sample (default 1: one request per "
                         "sample, as before)")
    _add_batch_args(mc)
    mc.set_defaults(func=cmd_collect_moralchoice)
    lk = sub.add_parser("likelihood", help="MoralChoice action likelihoods from token probabilities, not samples: "
                                            "exact (local transformers models, or a server that returns vLLM's "
                                            "prompt_logprobs) or from an API's top_logprobs (--estimator top_logprobs); "
                                            "Scherrer et al. 2023, Definition 1",
                        allow_abbrev=False)
    _add_backend_args(lk)
    lk.add_argument("--ambiguity", choices=["low", "high"], required=True)
    lk.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all)")
    lk.add_argument("--n-scenarios", type=_POS_INT, default=None, help="a seeded random subset of this size")
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
    lk.add_argument("--samples", type=_POS_INT, default=None,
                    help="with --estimator top_logprobs: samples of each repeat form (default the paper's M: 5 low, "
                         "10 high)")
    lk.add_argument("--top-logprobs", type=_int_in(1, 20), default=None,
                    help="with --estimator top_logprobs: alternatives asked for per request (default 20, OpenAI's "
                         "maximum)")
    lk.add_argument("--limit", type=_NONNEG_INT, default=None, help="score at most N new scenarios in this session")
    lk.set_defaults(func=cmd_likelihood)
    e = sub.add_parser("export", help="write the tidy .csv.gz of one or more run directories", allow_abbrev=False)
    e.add_argument("run_dirs", nargs="+")
    e.add_argument("--out", type=_new_file, required=True)
    e.set_defaults(func=cmd_export)
    r = sub.add_parser("repair", allow_abbrev=False,
                       help="make a damaged run directory resumable: quarantine corrupt or duplicated lines "
                            "(nothing is deleted), merge records.jsonl with records.jsonl.gz")
    r.add_argument("run_dir")
    r.add_argument("--manifest-from", default=None, metavar="OTHER_RUN_OR_MANIFEST",
                   help="give a run directory that has records but no manifest.json the manifest of the run it "
                        "belongs to (a run directory or a manifest.json), after checking that the records agree")
    r.set_defaults(func=cmd_repair)
    m = sub.add_parser("models", help="list the offline models shipped by PyPI packages", allow_abbrev=False)
    m.set_defaults(func=cmd_models)
    r = sub.add_parser("runs", help="the run directories under ROOT (default data/raw) as a Markdown table: "
                                    "what each holds and the command that resumes it", allow_abbrev=False)
    r.add_argument("root", nargs="?", default=None, help="folder of run directories (default: data/raw)")
    r.add_argument("--survey", default=None, choices=["psm", "moralchoice", "moralchoice-likelihood"])
    r.set_defaults(func=cmd_runs)
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
    _add_cost_args(es, collect=False)
    es.set_defaults(func=cmd_estimate)
    sw = sub.add_parser("sweep", allow_abbrev=False,
                        help="run every model x survey of a sweep file (TOML; moralkit.collect.sweep), resumably, "
                             "into the same run directories and exports as single runs")
    sw.add_argument("file", help="the sweep file (TOML)")
    sw.add_argument("--status", action="store_true",
                    help="print the status table (done/total, tokens, cost, errors, resume command) and send nothing")
    sw.add_argument("--only", action="append", default=[], help="run only this job, LABEL/SURVEY (repeatable)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bars")
    sw.add_argument("--batch", action="store_true",
                    help="send the jobs of the openai and anthropic backends through the providers' batch APIs "
                         "(about half the price, results within 24 h), unless a model or survey sets batch = false")
    sw.add_argument("--wait", type=_number(float, 0, what="a number of seconds >= 0"), default=None,
                    help="with batches: stop waiting after this many seconds (exit status 3; re-run to resume); "
                         "default: [sweep] wait, else until every batch has ended")
    sw.add_argument("--poll-interval", type=_number(float, 0, lo_open=True, what="a number of seconds > 0"),
                    default=None, help="with batches: seconds between polls (default: [sweep] poll_interval, else 30)")
    sw.set_defaults(func=cmd_sweep)
    f = sub.add_parser("findings", help="what the committed runs in data/ show, as Markdown (the README's section "
                                        "'What the committed runs show')", allow_abbrev=False)
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(func=cmd_findings)
    ca = sub.add_parser("cache", help="the response cache across runs (--cache): its place, entries and size",
                        allow_abbrev=False)
    ca.add_argument("--clear", action="store_true", help="delete every cached response")
    ca.set_defaults(func=cmd_cache)
    s = sub.add_parser("serve", help="OpenAI-compatible chat-completions server for a local model (loopback)",
                       allow_abbrev=False)
    s.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    s.add_argument("--gguf-file", default=None)
    s.add_argument("--host", default="127.0.0.1",
                   help="a loopback address (127.0.0.1, ::1, localhost); any other needs --allow-remote "
                        "(default: %(default)s)")
    s.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host: the server has no authentication, put your own access "
                        "control in front of it")
    s.add_argument("--port", type=_int_in(0, 65535), default=8000, help="0 picks a free port (default: %(default)s)")
    s.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    s.add_argument("--threads", type=_int_in(1, 1024), default=None, help="torch CPU threads")
    s.add_argument("--max-tokens-limit", type=_int_in(1, 1 << 20), default=1024,
                   help="largest max_tokens a request may ask for; more is a 400 (default: %(default)s)")
    s.add_argument("--max-prompt-tokens", type=_int_in(1, 1 << 24), default=4096,
                   help="longest prompt in tokens; longer is a 400 (default: %(default)s)")
    s.add_argument("--max-body-bytes", type=_int_in(1, 1 << 31), default=1 << 20,
                   help="largest request body; larger is a 413 (default: %(default)s)")
    s.add_argument("--request-timeout", type=_seconds, default=120.0,
                   help="seconds one generation may run before it is stopped with a 504 (default: %(default)s)")
    s.add_argument("--max-queue", type=_int_in(0, 100000), default=16,
                   help="requests that may wait while one generates; more get 503 + Retry-After "
                        "(default: %(default)s)")
    s.add_argument("--queue-timeout", type=_seconds, default=60.0,
                   help="seconds a request may wait for the model before a 503 + Retry-After (default: %(default)s)")
    s.set_defaults(func=cmd_serve)
    _finish(p)
    return p


def one_line(error: BaseException) -> str:
    """``error: <message>`` on one line (a multi-line message is joined with "; ").

    Examples
    --------
    >>> from moralkit.errors import DataError
    >>> one_line(DataError("no survey files found:\n  1. set MORALKIT_MORALCHOICE_DIR"))
    'error: no survey files found:; 1. set MORALKIT_MORALCHOICE_DIR'
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "error: " + ("; ".join(lines) or type(error).__name__)


def main(argv=None):
    """Run the command line; returns the exit status.

    A :class:`moralkit.errors.MoralkitError` (any ``ValueError``), a missing file, or a backend's
    ``RuntimeError`` is printed as one line on stderr, without a traceback, and gives status 2; a
    collection that ends with tasks undone gives 3 (2 when it stopped on a refusal no retry fixes:
    :attr:`moralkit.collect.runner.RunReport.fatal`), a run directory in use by another collector 4.
    """
    from moralkit.collect.runner import CollectionIncompleteError
    from moralkit.collect.secrets import process_redactor
    from moralkit.collect.store import RunLockedError

    a = build_parser().parse_args(argv)
    redact = process_redactor(getattr(a, "api_key_env", None), getattr(a, "base_url", None))
    if getattr(a, "scenarios", None):
        a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    try:
        if a.func in (cmd_collect_psm, cmd_collect_moralchoice, cmd_sweep):
            from moralkit.collect.runner import stop_on_signals

            with stop_on_signals():  # SIGINT / SIGTERM: await and store the requests in flight, exit 3
                a.func(a)
        else:
            a.func(a)
    except CollectionIncompleteError as e:
        print(redact.error_text(one_line(e)), file=sys.stderr)
        return 2 if getattr(e.report, "fatal", False) else 3  # a sweep's error has no single report
    except RunLockedError as e:
        print(redact.error_text(one_line(e)), file=sys.stderr)
        return 4
    except (ValueError, RuntimeError, OSError) as e:  # OSError: a missing file, no permission, a full disk
        print(redact.error_text(one_line(e)), file=sys.stderr)
        return 2
    except Exception:  # a bug: the traceback, through the secret filter
        import traceback

        print(redact.error_text(traceback.format_exc()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
