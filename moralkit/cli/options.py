"""The options several commands share, and the argparse types that refuse bad values at parse time.

A value outside its rule is refused before anything runs, with the rule in the message (exit status 2),
and never echoed when it could be a key (:func:`moralkit.collect.secrets.check_base_url`).

Examples
--------
>>> POS_INT("3"), POS_SECONDS("1.5")
(3, 1.5)
"""

from __future__ import annotations

import argparse
import math

__all__ = ["number", "POS_INT", "NONNEG_INT", "new_file", "int_in", "SECONDS", "POS_SECONDS", "add_backend_args",
           "add_cost_args", "add_batch_args"]


def number(kind, lo=None, lo_open=False, hi=None, what=""):
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


POS_INT = number(int, 1, what="an integer >= 1")
NONNEG_INT = number(int, 0, what="an integer >= 0")
SECONDS = number(float, 0, what="a number of seconds >= 0")
POS_SECONDS = number(float, 0, lo_open=True, what="a number of seconds > 0")


def _base_url(text):
    """argparse type of --base-url: an http(s) URL without credentials (never echoed)."""
    from moralkit.collect.secrets import check_base_url
    from moralkit.errors import MoralkitError

    try:
        return check_base_url(text)
    except MoralkitError as e:
        raise argparse.ArgumentTypeError(str(e).replace("base_url (--base-url) ", "")) from None


def new_file(text):
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


def int_in(lo, hi):
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




def add_backend_args(p):
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
    g.add_argument("--threads", type=POS_INT, default=None, help="torch CPU threads")
    g.add_argument("--batch-size", type=POS_INT, default=None, help="requests per forward pass / batch")
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
    g.add_argument("--concurrency", type=POS_INT, default=4, help="requests in flight (openai)")
    g.add_argument("--rpm", type=POS_INT, default=None, help="requests-per-minute cap (openai)")
    g.add_argument("--timeout", type=POS_SECONDS, default=60.0)
    g.add_argument("--max-retries", type=NONNEG_INT, default=6,
                   help="failed tries of one request before it is left undone for this session (openai)")
    g.add_argument("--backoff", type=SECONDS, default=1.0,
                   help="base of the exponential backoff between retries, seconds (jittered; Retry-After honoured)")
    s = p.add_argument_group("sampling")
    s.add_argument("--temperature", type=number(float, 0, what="a finite number >= 0"), default=1.0)
    s.add_argument("--top-p", type=number(float, 0, lo_open=True, hi=1, what="a number in (0, 1]"), default=1.0)
    s.add_argument("--top-k", type=NONNEG_INT, default=None,
                   help="top-k sampling: local models; sent in the body to OpenAI-compatible servers (vLLM, Together, "
                        "OpenRouter, llama.cpp) and to Anthropic (--anthropic-version 2023-06-01); refused for "
                        "OpenAI's API, which has none")
    s.add_argument("--max-tokens", type=POS_INT, default=None,
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
    p.add_argument("--export", type=new_file, default=None, help="tidy .csv.gz to write at the end")
    p.add_argument("--no-progress", action="store_true")
    add_cost_args(p)


def add_cost_args(p, collect=True):
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


def add_batch_args(p):
    g = p.add_argument_group("batch APIs and the response cache (moralkit.collect.batch, moralkit.collect.cache)")
    g.add_argument("--batch", action="store_true",
                   help="send the requests through the provider's batch API (--backend openai: files + batches; "
                        "anthropic: message batches): about half the price, results within 24 h; resumable")
    g.add_argument("--wait", type=SECONDS, default=None,
                   help="with --batch: stop waiting after this many seconds (exit status 3; re-run to resume); "
                        "default: until every batch has ended. Ctrl-C stops waiting too")
    g.add_argument("--poll-interval", type=POS_SECONDS,
                   default=30.0, help="with --batch: seconds between polls")
    g.add_argument("--cache", action="store_true",
                   help="use the response cache across runs (python -m moralkit cache): a request identical in "
                        "every sent field to one answered before is answered from it, without sending")

