"""Benchmark: the tail of ``run_all.py`` (after the last notebook ends, until ``index.html`` is written), with the
book built once after the notebooks (as before) and with the early build beside the last notebook
(:mod:`moralkit.book.early`).

It needs the sources of a real book: the ``_book/`` folder and ``run.json`` of a full run (default the project's
``build/``, left by README command 1; ``--from DIR`` for another). Both variants start from copies of it with no
HTML and no Sphinx environment, as on a fresh clone, in a scratch folder:

* ``old``: the final build of every page (write the sources, one Sphinx build);
* ``early``: the page of one notebook (``--last``, default the one that ends last in a run) is missing while the
  early build runs (a stand-in takes its place) and the final Sphinx process imports and waits; then the page is
  written and the tail is timed (wait for the early build, final sources, the incremental build).

Every figure is one line ``BENCH {json}`` (benchmarks/_record.py): ``tail_s`` and ``tail_cpu_s`` (wall and CPU
seconds of the tail; CPU of this process and of the Sphinx processes, without the waiting process's start-up,
which ran beside the last notebook: ``ahead_cpu_s``), ``early_s``/``early_cpu_s`` (the early build itself), and
``html_identical`` (every ``.html`` page, ``searchindex.js`` and ``objects.inv`` byte-identical to ``old``'s).

Usage::

    nice .venv/bin/python benchmarks/bench_book_tail.py [--from build] [--last 01_collect]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _record import emit, load  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


def _proc_cpu(pid: int) -> float:
    """CPU seconds a running child has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _wait_idle(pid: int, timeout: float = 120.0) -> None:
    """Until the waiting process has done its imports (its CPU time stops growing for a second)."""
    end, last = time.perf_counter() + timeout, -1.0
    while time.perf_counter() < end:
        now = _proc_cpu(pid)
        if now == last:
            return
        last = now
        time.sleep(1.0)


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    shutil.copytree(src / "_book", dst / "_book", ignore=shutil.ignore_patterns("sphinx*.log"))
    shutil.copy2(src / "run.json", dst / "run.json")
    return dst


def _outputs(d: Path) -> dict[str, bytes]:
    files = [p for p in d.rglob("*.html") if ".doctrees" not in p.parts]
    files += [d / "searchindex.js", d / "objects.inv"]
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in files}


def main(argv=None) -> None:
    from moralkit.book.early import EarlyBook
    from moralkit.book.run import publish

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src", default=str(HERE.parent / "build"), metavar="DIR")
    ap.add_argument("--last", default="01_collect", help="the notebook still running during the early build")
    args = ap.parse_args(argv)
    src = Path(args.src)
    if not (src / "_book" / "_toc.yml").exists() or not (src / "run.json").exists():
        print(json.dumps({"skipped": f"no book sources in {src}: run README command 1 first, or pass --from"}))
        return
    run = json.loads((src / "run.json").read_text(encoding="utf-8"))
    records = run["notebooks"]
    # the record names the run the pages come from, not a machine's path
    described = f"{src.name}/ of a full run built {run.get('built', 'at an unknown time')}"
    meta = {"built": "2026-01-01 00:00 UTC", "commit": "bench", "seconds": 100.0, "mode": "full", "jobs": 2}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        old = _copy(src, tmp / "old")
        l0, t, c = load(), time.perf_counter(), _cpu()
        _, err = publish(old / "_book", old, records, meta)
        if err:
            raise SystemExit(err)
        emit("book_tail", "old", l0, tail_s=round(time.perf_counter() - t, 2), tail_cpu_s=round(_cpu() - c, 2),
             notebook_pages=len(records), source=described)

        new = _copy(src, tmp / "early")
        page = new / "_book" / f"{args.last}.ipynb"
        kept = page.read_bytes()
        page.unlink()
        running = [{k: r[k] for k in ("name", "number", "title", "heading", "source")} for r in records
                   if r["name"] == args.last]
        early_records = [{**r, "not_run": True} if r["name"] == args.last else r for r in records]
        early = EarlyBook(new / "_book", new)
        l0, t, c = load(), time.perf_counter(), _cpu()
        early.start(early_records, running, meta)
        early.wait()  # the last notebook still runs meanwhile
        early_s, early_cpu = time.perf_counter() - t, _cpu() - c
        ahead = 0.0
        if early._final is not None:  # the final Sphinx process imports beside the last notebook
            _wait_idle(early._final.pid)
            ahead = _proc_cpu(early._final.pid)
        page.write_bytes(kept)  # the last notebook ends
        early.page_written(args.last)
        t, c = time.perf_counter(), _cpu()
        fresh, prepared = early.finish(records)
        _, err = publish(new / "_book", new, records, meta, fresh=fresh, prepared=prepared)
        if err:
            raise SystemExit(err)
        tail, tail_cpu = time.perf_counter() - t, _cpu() - c - ahead
        a, b = _outputs(old), _outputs(new)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        emit("book_tail", "early", l0, tail_s=round(tail, 2), tail_cpu_s=round(tail_cpu, 2),
             ahead_cpu_s=round(ahead, 2), early_s=round(early_s, 2), early_cpu_s=round(early_cpu, 2),
             fresh=fresh, last=args.last, notebook_pages=len(records), compared_files=len(a),
             html_identical=not differ, differ=differ[:10],
             source=described)


if __name__ == "__main__":
    main()
