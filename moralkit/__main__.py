"""Command line: ``python -m moralkit collect psm|moralchoice ...``, ``likelihood``, ``export``, ``repair``, ``runs``, ``findings``,
``models``, ``serve``.

Exit status: 0 done; 2 bad input or damaged data (the message names the fix); 3 a collection ended
with tasks undone (its completeness line and the failing requests are printed; re-run to resume);
4 the run directory is in use by another collector.

Examples
--------
Collect the PSM from the default offline model (resumes if the run directory exists)::

    python -m moralkit collect psm --backend transformers --model qwen2.5-coder-0.5b-instruct \\
        --out data/raw/psm-qwen2.5-coder-0.5b-instruct-t1-s0 --temperature 1.0 --seed 0

From an API (key in the environment variable named by --api-key-env)::

    OPENAI_API_KEY=... python -m moralkit collect psm --backend openai --model gpt-4o-mini \\
        --out runs/psm-gpt-4o-mini --concurrency 8 --rpm 500
"""

from __future__ import annotations

import argparse
import sys


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors never echo values: an unknown option's value may be a key."""

    def error(self, message):
        if message.startswith("unrecognized arguments:"):
            names = [t.split("=", 1)[0] for t in message.split(":", 1)[1].split() if t.startswith("-")]
            message = ("unrecognized arguments: " + (" ".join(names) or "(positional values)")
                       + " (values are not shown; no option takes an API key: put it in an environment variable "
                         "and pass its name with --api-key-env)")
        super().error(message)


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
    g.add_argument("--backend", choices=["transformers", "openai"], default="transformers")
    g.add_argument("--model", default=None,
                   help="registry name (see `python -m moralkit models`), .gguf file, local directory, hub id, "
                        "or the API model name (default: qwen2.5-coder-0.5b-instruct)")
    g.add_argument("--gguf-file", default=None, help="GGUF file inside --model (a directory or hub repo)")
    g.add_argument("--device", default="auto")
    g.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    g.add_argument("--batch-size", type=int, default=None, help="requests per forward pass / batch")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="NAME of the environment variable holding the key (the key itself is never an option, "
                        "and is never written or printed)")
    g.add_argument("--concurrency", type=int, default=4, help="requests in flight (openai)")
    g.add_argument("--rpm", type=int, default=None, help="requests-per-minute cap (openai)")
    g.add_argument("--timeout", type=float, default=60.0)
    g.add_argument("--max-retries", type=int, default=6,
                   help="failed tries of one request before it is left undone for this session (openai)")
    g.add_argument("--backoff", type=float, default=1.0,
                   help="base of the exponential backoff between retries, seconds (jittered; Retry-After honoured)")
    s = p.add_argument_group("sampling")
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--top-k", type=int, default=None)
    s.add_argument("--max-tokens", type=int, default=None)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--system", default=None, help="system message (default: none)")
    s.add_argument("--persona", default=None,
                   help="a named system-prompt persona (moralkit.collect.personas: none, utilitarian, "
                        "deontological, care, virtue); the label gains '+persona-<name>'")
    p.add_argument("--label", default=None, help="respondent label in the exported data (default: model name)")
    p.add_argument("--out", required=True, help="run directory (records.jsonl, manifest.json); re-run to resume")
    p.add_argument("--export", default=None, help="tidy .csv.gz to write at the end")
    p.add_argument("--no-progress", action="store_true")


def _backend(a, default_batch):
    from moralkit.collect.backends import make_backend
    from moralkit.collect.localmodels import DEFAULT_MODEL

    model = a.model or DEFAULT_MODEL
    if a.backend == "transformers":
        return make_backend("transformers", model, gguf_file=a.gguf_file, device=a.device, dtype=a.dtype,
                            batch_size=a.batch_size or default_batch, threads=a.threads)
    if a.model is None:
        raise SystemExit("--model is required with --backend openai")
    return make_backend("openai", model, base_url=a.base_url, api_key_env=a.api_key_env,
                        concurrency=a.concurrency, rpm=a.rpm, timeout=a.timeout, max_retries=a.max_retries,
                        backoff=a.backoff)


def _sampling(a, default_max):
    from moralkit.collect.backends import Sampling

    return Sampling(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k, max_tokens=a.max_tokens or default_max)


def _apply_persona(a):
    """Turn ``--persona`` into the system message and the respondent label."""
    if a.persona is None:
        return
    from moralkit.collect.localmodels import DEFAULT_MODEL
    from moralkit.collect.personas import get_persona, persona_label

    p = get_persona(a.persona)
    if a.system is not None:
        raise ValueError("give either --persona or --system, not both")
    a.system = p.system
    a.label = persona_label(a.label or a.model or DEFAULT_MODEL, p.name)


def cmd_collect_psm(a):
    _apply_persona(a)
    from moralkit.collect.psm import psm_quality, run_psm

    b = _backend(a, 1)
    ds, rep = run_psm(b, a.out, label=a.label, design_seed=a.design_seed, seed=a.seed, order=a.order,
                      sampling=_sampling(a, 16), system=a.system, max_attempts=a.attempts, limit=a.limit,
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

    b = _backend(a, 8)
    qt = tuple(a.question_types.split(",")) if a.question_types else None
    df, rep = run_moralchoice(b, a.out, ambiguity=a.ambiguity, label=a.label, scenarios=a.scenarios,
                              n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed, samples=a.samples,
                              question_types=qt, sampling=_sampling(a, 8), max_tokens=a.max_tokens, seed=a.seed,
                              system=a.system, order=a.order, limit=a.limit, progress=not a.no_progress,
                              export=a.export, return_report=True)
    q = moralchoice_quality(a.out)
    print(f"{len(df)} answers; decisions {q['decision']}")
    if a.export:
        print(f"wrote {a.export}")
    print(rep.line(*MC_LINE))


def cmd_likelihood(a):
    from moralkit.collect.likelihood import run_likelihood

    b = _backend(a, 1)
    qt = tuple(a.question_types.split(",")) if a.question_types else None
    df = run_likelihood(b, a.out, ambiguity=a.ambiguity, persona=a.persona or "none", label=a.label,
                        scenarios=a.scenarios, n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed,
                        answers=a.answers, question_types=qt, order=a.order, limit=a.limit,
                        progress=not a.no_progress, export=a.export)
    n = df["scenario_id"].nunique() if len(df) else 0
    print(f"{n} scenarios x forms = {len(df)} rows; mean covered mass {df['covered'].mean() if n else float('nan'):.4f}")
    if a.export:
        print(f"wrote {a.export}")


def cmd_export(a):
    from moralkit.collect.store import RecordStore

    st = RecordStore(a.run_dirs[0], readonly=True)
    survey = st.manifest.get("survey")
    st.close()
    if survey == "psm":
        from moralkit.collect.psm import export_psm

        print(export_psm(a.run_dirs, a.out))
    elif survey == "moralchoice-likelihood":
        from moralkit.collect.likelihood import export_likelihood

        print(export_likelihood(a.run_dirs, a.out))
    else:
        from moralkit.collect.moralchoice import export_moralchoice

        print(export_moralchoice(a.run_dirs, a.out))


def cmd_repair(a):
    from moralkit.collect.store import repair_run

    r = repair_run(a.run_dir)
    print(f"{a.run_dir}: {r['kept']} records kept, {r['quarantined']} lines moved to quarantine.jsonl "
          f"{r['reasons'] or ''}, {r['merged_from_gz']} merged from records.jsonl.gz; records.jsonl and "
          "records.jsonl.gz rewritten. Re-run the collection command to resume.")


def cmd_models(a):
    from moralkit.collect.localmodels import LOCAL_MODELS, local_model_available

    for m in LOCAL_MODELS.values():
        print(f"{m.name:32s} {m.upstream:36s} {m.licence:11s} {m.size / 1e6:7.0f} MB  "
              f"{'installed' if local_model_available(m.name) else 'not installed: ' + m.pip}")


def cmd_runs(a):
    from moralkit.collect.summary import find_runs, runs_markdown

    print(runs_markdown(find_runs(a.root, survey=a.survey)))


def cmd_findings(a):
    from moralkit.studies.findings import findings_markdown

    print(findings_markdown(seed=a.seed), end="")


def cmd_serve(a):
    from moralkit.collect.server import ServerLimits, check_host, serve

    check_host(a.host, a.allow_remote)  # before anything loads
    limits = ServerLimits(max_tokens=a.max_tokens_limit, default_max_tokens=min(256, a.max_tokens_limit),
                          max_prompt_tokens=a.max_prompt_tokens, max_body_bytes=a.max_body_bytes,
                          request_timeout=a.request_timeout, max_queue=a.max_queue, queue_timeout=a.queue_timeout)
    serve(a.model, host=a.host, port=a.port, dtype=a.dtype, batch_size=1, gguf_file=a.gguf_file,
          allow_remote=a.allow_remote, limits=limits, threads=a.threads)


def build_parser():
    # allow_abbrev=False everywhere: an abbreviation must never turn into another option (a key typed
    # as ``--api-key sk-...`` would otherwise be taken for ``--api-key-env`` and recorded)
    p = _Parser(prog="python -m moralkit", description=__doc__.split("\n")[0], allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="administer a survey to an LLM", allow_abbrev=False)
    csub = c.add_subparsers(dest="survey", required=True)
    ps = csub.add_parser("psm", help="Priced Survey Methodology (Seror 2025, Section 2.1)", allow_abbrev=False)
    _add_backend_args(ps)
    ps.add_argument("--design-seed", type=int, default=0)
    ps.add_argument("--order", choices=["paper", "shuffled"], default="paper")
    ps.add_argument("--attempts", type=int, default=3)
    ps.add_argument("--limit", type=int, default=None, help="only the first N constrained rounds")
    ps.set_defaults(func=cmd_collect_psm)
    mc = csub.add_parser("moralchoice", help="MoralChoice (Scherrer et al. 2023, Section 3.3)", allow_abbrev=False)
    _add_backend_args(mc)
    mc.add_argument("--ambiguity", choices=["low", "high"], required=True)
    mc.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all or --n-scenarios)")
    mc.add_argument("--n-scenarios", type=int, default=None, help="a seeded random subset of this size")
    mc.add_argument("--scenario-seed", type=int, default=0)
    mc.add_argument("--samples", type=int, default=None, help="M samples per question form (paper: 5 low, 10 high)")
    mc.add_argument("--question-types", default=None, help="subset of ab,compare,repeat")
    mc.add_argument("--order", choices=["table", "shuffled"], default="table",
                    help="scenario order: the survey table's (grouped by rule) or seeded random (--scenario-seed), "
                         "so that a run stopped early holds a random subset of complete scenarios")
    mc.add_argument("--limit", type=int, default=None,
                    help="complete at most N more scenarios in this session (the next ones in --order)")
    mc.set_defaults(func=cmd_collect_moralchoice)
    lk = sub.add_parser("likelihood", help="exact MoralChoice action likelihoods from token probabilities "
                                            "(local transformers models, or an OpenAI-compatible server that returns vLLM's "
                                            "prompt_logprobs; Scherrer et al. 2023, Definition 1)",
                        allow_abbrev=False)
    _add_backend_args(lk)
    lk.add_argument("--ambiguity", choices=["low", "high"], required=True)
    lk.add_argument("--scenarios", default=None, help="comma-separated scenario ids (default: all)")
    lk.add_argument("--n-scenarios", type=int, default=None, help="a seeded random subset of this size")
    lk.add_argument("--scenario-seed", type=int, default=0)
    lk.add_argument("--question-types", default=None, help="subset of ab,compare,repeat")
    lk.add_argument("--answers", choices=["canonical", "templates"], default="canonical",
                    help="canonical answer set (moralkit.moralchoice.likelihood)")
    lk.add_argument("--order", choices=["overlap-first", "table"], default="overlap-first")
    lk.add_argument("--limit", type=int, default=None, help="score at most N new scenarios in this session")
    lk.set_defaults(func=cmd_likelihood)
    e = sub.add_parser("export", help="write the tidy .csv.gz of one or more run directories", allow_abbrev=False)
    e.add_argument("run_dirs", nargs="+")
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_export)
    r = sub.add_parser("repair", allow_abbrev=False,
                       help="make a damaged run directory resumable: quarantine corrupt or duplicated lines "
                            "(nothing is deleted), merge records.jsonl with records.jsonl.gz")
    r.add_argument("run_dir")
    r.set_defaults(func=cmd_repair)
    m = sub.add_parser("models", help="list the offline models shipped by PyPI packages", allow_abbrev=False)
    m.set_defaults(func=cmd_models)
    r = sub.add_parser("runs", help="the run directories under ROOT (default data/raw) as a Markdown table: "
                                    "what each holds and the command that resumes it", allow_abbrev=False)
    r.add_argument("root", nargs="?", default=None, help="folder of run directories (default: data/raw)")
    r.add_argument("--survey", default=None, choices=["psm", "moralchoice", "moralchoice-likelihood"])
    r.set_defaults(func=cmd_runs)
    f = sub.add_parser("findings", help="what the committed runs in data/ show, as Markdown (the README's section "
                                        "'What the committed runs show')", allow_abbrev=False)
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(func=cmd_findings)
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
    collection that ends with tasks undone gives 3, a run directory in use by another collector 4.
    """
    from moralkit.collect.runner import CollectionIncompleteError
    from moralkit.collect.store import RunLockedError

    a = build_parser().parse_args(argv)
    if getattr(a, "scenarios", None):
        a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    try:
        a.func(a)
    except CollectionIncompleteError as e:
        print(one_line(e), file=sys.stderr)
        return 3
    except RunLockedError as e:
        print(one_line(e), file=sys.stderr)
        return 4
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        print(one_line(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
