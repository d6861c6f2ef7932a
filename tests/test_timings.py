"""Every timing the README and the manual (docs/*.md) state comes from a benchmark (issue 30, part 3).

A timing is a number with a unit of time (``ms``, ``s``, ``min``, ``minutes``, ``seconds``), or several
joined by a dash (a range) or a slash (``0.44 / 8.73 ms``, median / max). It is *sourced* when the
paragraph or list item that states it (a nested item on its own) names a ``benchmarks/bench_*.py`` script
that exists, and a record of that benchmark in ``benchmarks/results.jsonl`` (date, load, CPUs) holds each
number as a duration, to the text's precision: a field whose name carries the unit (``s``, ``cpu_s``,
``median_ms``, ``s_per_attempt``; not a count, a rate or a load), within half a unit of the text's last
digit. Durations that are settings, not measurements (a default time-out, a polling interval), are listed
in ``SETTINGS``. Timings measured before the benchmarks wrote records are listed in ``UNSOURCED`` until a
benchmark re-measures them; the list may only shrink: a new unsourced timing fails, and so does a listed
one that is gone or sourced.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_NUM = r"\d+(?:\.\d+)?"
#: a number, or several joined by a dash (a range) or a slash (e.g. median / max), then a unit of time
TIME = re.compile(rf"(?<![\w.])({_NUM}(?:\s*[–/-]\s*{_NUM})*)\s*(ms|s|min|minutes|seconds)(?![\w/])")
BENCH = re.compile(r"benchmarks/(bench_\w+)\.py")
#: seconds per unit, of the text's units and of the units a record's key names (``s``, ``cpu_s``, ``median_ms``)
SCALE = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "seconds": 1.0, "min": 60.0, "minutes": 60.0}

#: (file, number as written, unit): durations that are settings or limits, not measurements.
SETTINGS = {
    ("docs/collecting.md", "10", "minutes"), ("docs/collecting.md", "30", "s"), ("docs/collecting.md", "60", "s"),
    ("docs/collecting.md", "120", "s"), ("docs/collecting.md", "4–16", "min"), ("docs/psm.md", "20", "s"),
    ("docs/psm.md", "60", "s"), ("docs/collecting.md", "3", "s"), ("docs/collecting.md", "0.3", "s"),
    ("docs/psm.md", "0.3", "s"),  # hm_table1's --time-limit in the stopped run
    ("docs/psm.md", "45", "s"),  # hm_table1's --own-time-limit in the stopped run
    ("docs/psm.md", "10", "s"),  # issue 30's target for exact HM ("under 10 s")
}

#: (file, number as written, unit): timings with no results.jsonl record yet (measured by hand or by a
#: benchmark before it wrote records); shrink-only. docs/run_all.md ("Run time, and what a first run
#: costs") explains the check.
UNSOURCED: set[tuple[str, str, str]] = set()


def _blocks(text: str):
    """Paragraphs and list items (nested ones too, each on its own), each with its indented lines (tables too).

    A benchmark named in one list item sources the timings of that item only, not those of its siblings or
    of the item it is nested in."""
    block: list[str] = []
    blank = False
    for line in text.splitlines():
        if not line.strip():
            blank = True
            continue
        top = not line[0].isspace()
        item = re.match(r"\s*([-*]|\d+\.)\s", line)
        if block and ((top and (blank or line.startswith(("|", "#")))) or item):
            yield " ".join(block)
            block = []
        block.append(line.strip())
        blank = False
    if block:
        yield " ".join(block)


def _durations(record, unit: str | None = None) -> list[float]:
    """The durations of a record, in seconds: the numbers whose key (or the key of the list or dict that holds
    them) names a unit of time as one of its ``_``-separated words (``s``, ``cpu_s``, ``median_ms``,
    ``api_seconds``). Counts, sizes, loads and dates are not durations."""
    out = []
    items = record.items() if isinstance(record, dict) else ((None, v) for v in record)
    for k, v in items:
        words = str(k).split("_") if k is not None else []
        # the key's unit (not a rate: ``tokens_per_s``), else the enclosing key's
        u = next((w for i, w in reversed(list(enumerate(words))) if w in SCALE and words[i - 1:i] != ["per"]),
                 None) or unit
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)) and u:
            out.append(v * SCALE[u])
        elif isinstance(v, (list, dict)):
            out.extend(_durations(v, u))
    return out


def _recorded(number: str, unit: str, seconds: list[float]) -> bool:
    """A record holds the text's number at the text's precision: the duration in the text's unit lies within
    half a unit of the text's last digit (85 ms is a record of 0.0849 s, not of 0.0844 s; a tie, such as
    8.135 s written 8.13 or 8.14, is a rounding either way)."""
    places = len(number.split(".")[1]) if "." in number else 0
    want, half = Decimal(number), Decimal(5).scaleb(-places - 1)
    return any(abs(Decimal(repr(w / SCALE[unit])) - want) <= half + Decimal("1e-9") for w in seconds)


def timings():
    """Every timing of README.md and docs/*.md: (file, number as written, unit, sourced)."""
    records: dict[str, list[float]] = {}
    for line in (ROOT / "benchmarks" / "results.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            records.setdefault(r["bench"], []).extend(_durations(r))
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    out = []
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        for block in _blocks(f.read_text(encoding="utf-8")):
            benches = [b for b in BENCH.findall(block) if (ROOT / "benchmarks" / f"{b}.py").exists()]
            values = [v for b in benches for v in records.get(b.removeprefix("bench_"), [])]
            for m in TIME.finditer(block):
                written, unit = m.groups()
                sourced = all(_recorded(n, unit, values) for n in re.findall(_NUM, written))
                out.append((rel, written, unit, sourced))
    return out


def test_every_timing_comes_from_a_benchmark_record():
    found = timings()
    unsourced = {(f, n, u) for f, n, u, ok in found if not ok} - SETTINGS
    new = sorted(unsourced - UNSOURCED)
    assert not new, ("timings with no benchmark record (name the benchmarks/bench_*.py script in the same paragraph, "
                     f"and collect its record into benchmarks/results.jsonl): {new}")
    gone = sorted(UNSOURCED - unsourced)
    assert not gone, f"these timings are sourced or gone now: remove them from UNSOURCED: {gone}"


def test_the_check_finds_an_unsourced_timing():
    """The parser sees a timing, and a record of the named benchmark makes it sourced."""
    block = "Command 1 takes 132.6 s (`benchmarks/bench_run_all.py`), the book 99.9 s, LS(e) 0.22 / 85 ms."
    assert [m.group(1) for m in TIME.finditer(block)] == ["132.6", "99.9", "0.22 / 85"]
    assert _recorded("132.6", "s", [132.6]) and not _recorded("99.9", "s", [132.6])
    assert _recorded("0.41", "s", [0.41]) and _recorded("85", "ms", [0.085]) and _recorded("85", "ms", [0.0849])
    # at the text's precision: within half a unit of its last digit, not a coarser or a shifted figure
    assert not _recorded("85", "ms", [0.0844]) and not _recorded("0.4", "s", [0.46]) and _recorded("0.13", "s", [0.125])
    assert _recorded("8.13", "s", [8.135]) and not _recorded("8.13", "s", [8.1356]) and not _recorded("8", "s", [7.4])
    assert not _recorded("1", "s", [1.6]) and _recorded("24", "minutes", [1440.0]) and not _recorded("24", "minutes", [24.9])
    assert list(_blocks("a\n- b 1 s\n  c\n\n  | t |\n\nd")) == ["a", "- b 1 s c | t |", "d"]
    assert list(_blocks("- a\n  - b\n    | t |\n  - c\n| u |\n| v |")) == ["- a", "- b | t |", "- c", "| u |", "| v |"]


def test_only_durations_of_a_record_source_a_timing():
    """A count, a size, a rate or a load in a record is not a duration: 160 rounds do not source "160 s"."""
    rec = {"bench": "x", "T": 160, "n_upper": 45, "cpu_s": [6.3, 0.031], "cuts": {"s": 3.334, "n_kept": 30},
           "median_ms": 4.04, "prompt_tokens_per_s": 159, "s_per_attempt": 14.08, "api_seconds": 4538.1,
           "per_notebook": {"02": [25.1]}, "load_start": [1.0, 2.0, 3.0], "cpus": 2, "ok": True}
    assert sorted(_durations(rec)) == sorted([6.3, 0.031, 3.334, 4.04e-3, 14.08, 4538.1])
