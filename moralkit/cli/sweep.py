"""``sweep``: every model x survey of a sweep file, resumably (:mod:`moralkit.collect.sweep`)."""

from __future__ import annotations

from .options import POS_SECONDS, SECONDS

__all__ = ["register_sweep", "cmd_sweep"]


def register_sweep(sub) -> None:
    """Add ``sweep`` to the subparsers ``sub``."""
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
    sw.add_argument("--wait", type=SECONDS, default=None,
                    help="with batches: stop waiting after this many seconds (exit status 3; re-run to resume); "
                         "default: [sweep] wait, else until every batch has ended")
    sw.add_argument("--poll-interval", type=POS_SECONDS,
                    default=None, help="with batches: seconds between polls (default: [sweep] poll_interval, else 30)")
    sw.set_defaults(func=cmd_sweep)


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

