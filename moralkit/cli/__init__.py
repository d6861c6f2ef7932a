"""The command line, ``moralkit`` or ``python -m moralkit``: ``collect psm|moralchoice ...``, ``likelihood``,
``export``, ``repair``, ``models``, ``runs``, ``estimate``, ``sweep``, ``findings``, ``cache``, ``serve``.

Exit status: 0 done; 2 bad input, damaged data, or a collection the server refused (a 400/422 naming
the rejected parameter and the flag that changes it, HTTP 401 wrong key, 403, 404 unknown model: its
redacted message is printed; the message names the fix); 3 a collection ended with tasks undone (its
completeness line and the failing requests are printed; re-run to resume); 4 the run directory is in use
by another collector. Invalid option values are refused before anything runs. Whatever is printed on
stderr, tracebacks included, passes through the secret filter (:mod:`moralkit.collect.secrets`).

One module per group of commands, each registering its subparsers: :mod:`~moralkit.cli.collection`
(``collect``, ``likelihood``), :mod:`~moralkit.cli.runs` (``export``, ``repair``, ``models``, ``runs``,
``cache``), :mod:`~moralkit.cli.cost` (``estimate``), :mod:`~moralkit.cli.sweep`, :mod:`~moralkit.cli.analysis`
(``findings``) and :mod:`~moralkit.cli.serve`; the shared options are in :mod:`~moralkit.cli.options`, the
backend a collection runs with in :mod:`~moralkit.cli.backends`, the parser in :mod:`~moralkit.cli.parser`.

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

import sys

from .collection import cmd_collect_moralchoice, cmd_collect_psm
from .parser import build_parser
from .sweep import cmd_sweep

__all__ = ["main", "build_parser", "one_line"]


def one_line(error: BaseException) -> str:
    r"""``error: <message>`` on one line (a multi-line message is joined with "; ").

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

