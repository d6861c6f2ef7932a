"""The parser of the command line: one subparser per command, registered by the command's module.

The help shows each option's default; an option without help of its own takes the shared one
(``_SHARED_HELP``), so that ``--help`` lists no option without a text. Abbreviations are refused
everywhere (``allow_abbrev=False``), and an unknown option's value is never echoed (it may be a key).
"""

from __future__ import annotations

import argparse
import sys

from moralkit import __version__

from . import analysis, collection, cost, runs, serve, sweep

__all__ = ["build_parser"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors never echo values: an unknown option's value may be a key."""

    def error(self, message):
        if message.startswith("unrecognized arguments:"):
            names = [t.split("=", 1)[0] for t in message.split(":", 1)[1].split() if t.startswith("-")]
            message = ("unrecognized arguments: " + (" ".join(names) or "(positional values)")
                       + " (values are not shown; no option takes an API key: put it in an environment variable "
                         "and pass its name with --api-key-env)")
        super().error(message)


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
    collection.register_collect(sub)
    collection.register_likelihood(sub)
    runs.register_export(sub)
    runs.register_repair(sub)
    runs.register_models(sub)
    runs.register_runs(sub)
    cost.register_estimate(sub)
    sweep.register_sweep(sub)
    analysis.register_findings(sub)
    runs.register_cache(sub)
    serve.register_serve(sub)
    _finish(p)
    return p
