"""Mending a damaged run directory so that it resumes, losing nothing (``python -m moralkit repair RUN``).

:func:`repair_run` runs in named phases, each holding the run's lock (:class:`~moralkit.collect.runlock.RunLock`):

1. :func:`_read_copies`: read ``records.jsonl`` and what ``records.jsonl.gz`` still holds, setting a
   damaged ``.gz`` aside (renamed, never deleted);
2. :func:`_candidate_lines`: every line of ``records.jsonl``, its torn last line, and the ``.gz``'s lines
   that ``records.jsonl`` lacks;
3. :func:`_triage`: keep each record, fix it when that needs no guess, or set it aside (not a record,
   or a duplicated ``(task, attempt)``);
4. :func:`_write_back`: quarantine what was set aside, then rewrite both copies atomically;
5. :func:`_adopt_manifest` (``--manifest-from``): give a run without a manifest the manifest of the run
   its records belong to, after checking that they agree;
6. :func:`_repair_journal`: move the batch journal's lines that are not events to ``quarantine.jsonl``.

:func:`check_resumable` says why a run still cannot resume. Both are also importable from
:mod:`moralkit.collect.store`.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..atomicfile import atomic_write_bytes, remove_stale_temporaries_in
from ..errors import DataError, MoralkitError
from .provenance import utc_now
from .record_files import (
    MANIFEST,
    QUARANTINE,
    RECORDS,
    RECORDS_GZ,
    RunNotFoundError,
    check_run_dir,
    gzip_bytes,
    index_attempts,
    quarantine,
    read_manifest,
    read_records,
    record_line,
    schema_problem,
)
from .runlock import RunLock

__all__ = ["repair_run", "check_resumable"]

#: Record fields that must agree with the manifest a repair gives a run (``--manifest-from``).
_IDENTITY_FIELDS = ("survey", "label", "backend", "model", "ambiguity", "persona", "answers", "design_seed")


def check_resumable(run_dir) -> str | None:
    """Why ``run_dir`` cannot be resumed or exported (no or bad manifest, bad records, duplicates), or ``None``.

    The checks of :class:`~moralkit.collect.store.RecordStore` opened read-only: a directory, a manifest
    that is a JSON object, records that are all records, no duplicated ``(task, attempt)``, and a batch
    journal whose lines are all events.
    """
    run_dir = Path(run_dir)
    try:
        check_run_dir(run_dir)
        read_manifest(run_dir)
        index_attempts(read_records(run_dir), run_dir / RECORDS, run_dir)
        from .batch_journal import journal_problem

        why = journal_problem(run_dir)
        if why is not None:
            return why
    except (ValueError, FileNotFoundError, OSError) as e:
        return str(e)
    return None


def _fixed(rec: dict) -> dict | None:
    """A record that :func:`repair_run` can fix without guessing (an ``attempt`` written as ``"3"`` or
    ``3.0``), fixed; else ``None``."""
    a = rec.get("attempt")
    if isinstance(a, str) and a.strip().isdigit():
        rec = dict(rec, attempt=int(a.strip()))
    elif isinstance(a, float) and a.is_integer():
        rec = dict(rec, attempt=int(a))
    else:
        return None
    return rec if schema_problem(rec) is None else None


def _gunzip_prefix(path: Path) -> tuple[bytes, str | None]:
    """Everything a (possibly truncated or damaged) gzip file still holds, and what is wrong with it
    (``None`` when it is complete)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = []
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 16)
                if not chunk:
                    break
                out.append(d.decompress(chunk))
                if d.eof:
                    break
        out.append(d.flush())
    except zlib.error as e:
        return b"".join(out), f"damaged ({e})"
    if not d.eof:
        return b"".join(out), "truncated (the compressed stream ends early)"
    return b"".join(out), None


def _adopt_manifest(run_dir: Path, source, records) -> Path:
    """Write ``source``'s manifest (a run directory or a manifest file) into ``run_dir``, if its records agree."""
    src = Path(source)
    m = read_manifest(src)
    for n, rec in records:
        for k in _IDENTITY_FIELDS:
            if k in rec and k in m and rec[k] != m[k]:
                raise DataError(
                    f"{run_dir / RECORDS}, line {n}: {k}={rec[k]!r}, but the manifest of {src} says {m[k]!r}: these "
                    "records belong to another run. Give the manifest of the run they came from, or collect into a "
                    "new directory.")
    m = {k: v for k, v in m.items() if k not in ("sessions", "finished", "last_finished")}
    m.update(sessions=[], manifest_from=str(src), manifest_adopted=utc_now())
    text = json.dumps(m, indent=1, sort_keys=False, default=str) + "\n"
    return atomic_write_bytes(run_dir / MANIFEST, text.encode("utf-8", "backslashreplace"))


# ---------------------------------------------------------------------------------------- the phases
def _read_copies(run_dir: Path) -> tuple[bytes, bytes | None, list]:
    """Phase 1: ``(records.jsonl bytes, what records.jsonl.gz holds or None, files set aside)``; a damaged
    ``.gz`` is renamed ``records.jsonl.gz.corrupt-<time>`` after its complete lines are read."""
    jl, gz = run_dir / RECORDS, run_dir / RECORDS_GZ
    data = jl.read_bytes() if jl.exists() else b""
    packed, set_aside = None, []
    if gz.exists():
        packed, damage = _gunzip_prefix(gz)
        if damage is not None:
            aside = gz.with_name(f"{RECORDS_GZ}.corrupt-{utc_now().replace(':', '')}")
            os.replace(gz, aside)
            n_rec = packed.count(b"\n")
            set_aside.append(f"{aside.name} ({damage}; its {n_rec} complete line(s) were recovered)")
    return data, packed, set_aside


def _candidate_lines(data: bytes, packed: bytes | None) -> tuple[list, int]:
    """Phase 2: ``([(line number, bytes, source file)], lines merged from the .gz)``: every line of
    ``records.jsonl`` (its torn last one too), then the ``.gz``'s lines it does not hold."""
    lines = data.split(b"\n")
    torn = lines.pop()
    items = [(i, line, RECORDS) for i, line in enumerate(lines, 1)]
    if torn.strip():
        items.append((len(lines) + 1, torn, RECORDS))
    merged = 0
    if packed is not None and not data.startswith(packed):
        seen = set(lines)
        glines = packed.split(b"\n")
        gtorn = glines.pop()
        for i, line in enumerate(glines, 1):
            if line not in seen:
                items.append((i, line, RECORDS_GZ))
                seen.add(line)
                merged += 1
        if gtorn.strip():
            items.append((len(glines) + 1, gtorn, RECORDS_GZ))
    return items, merged


@dataclass
class _Triage:
    """What phase 3 decided: lines kept (bytes), kept records with their new line numbers, lines set aside
    ``(line, bytes, reason, source)``, why, and how many were fixed in place."""

    keep: list = field(default_factory=list)
    good: list = field(default_factory=list)
    bad: list = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    fixed: int = 0
    first: dict = field(default_factory=dict)  # (task, attempt) -> (line, source) of the record kept


def _decode_or_fix(run_dir: Path, t: _Triage, i: int, line: bytes, src: str) -> tuple[dict, bytes]:
    """One line as a record: decoded, or fixed in place (the original goes to the quarantine); a
    :class:`ValueError` saying why when it is not a record."""
    rec = json.loads(line)
    if not isinstance(rec, dict):
        raise DataError(f"a JSON {type(rec).__name__}, not an object")
    why = schema_problem(rec)
    if why is not None:
        rec2 = _fixed(rec)
        if rec2 is None:
            raise DataError(f"wrong schema: {why}")
        quarantine(run_dir, [(i, line, f"fixed in place ({why}); this is the original")], source=src)
        rec, line = rec2, record_line(rec2).rstrip(b"\n")
        t.fixed += 1
    return rec, line


def _triage(run_dir: Path, items) -> _Triage:
    """Phase 3: keep, fix or set aside each candidate line; of several attempts with one ``(task, attempt)``
    the first is kept."""
    t = _Triage()
    for i, line, src in items:
        if not line.strip():
            continue
        try:
            rec, line = _decode_or_fix(run_dir, t, i, line, src)
            if rec.get("kind", "attempt") == "attempt":
                k = (rec["task"], int(rec["attempt"]))
                if k in t.first:
                    why = f"duplicate of task {k[0]!r} attempt {k[1]} ({t.first[k][1]} line {t.first[k][0]})"
                    t.bad.append((i, line, why, src))
                    t.reasons["duplicate"] += 1
                    continue
                t.first[k] = (i, src)
        except ValueError as e:
            t.bad.append((i, line, f"not a record: {str(e)[:120]}", src))
            t.reasons["not a record"] += 1
            continue
        t.keep.append(line)
        t.good.append((len(t.keep), rec))
    if t.fixed:
        t.reasons["fixed in place"] += t.fixed
    return t


def _write_back(run_dir: Path, t: _Triage, data: bytes, packed: bytes | None, set_aside: list) -> None:
    """Phase 4: quarantine the lines set aside (by source file), then rewrite ``records.jsonl`` (when it
    changed) and ``records.jsonl.gz`` atomically."""
    jl, gz = run_dir / RECORDS, run_dir / RECORDS_GZ
    for src in (RECORDS, RECORDS_GZ):
        quarantine(run_dir, [(i, b, why) for i, b, why, s in t.bad if s == src], source=src)
    if t.bad or t.fixed:
        set_aside.insert(0, QUARANTINE)
    new = b"".join(line + b"\n" for line in t.keep)
    if new != data:
        atomic_write_bytes(jl, new)
    if t.keep or gz.exists() or packed is not None:
        atomic_write_bytes(gz, gzip_bytes(new))


def _repair_journal(run_dir: Path, set_aside: list) -> int:
    """Phase 6: move the lines of the batch journal (``batches.jsonl``) that are not events
    (:func:`~moralkit.collect.batch_journal.event_problem`), and a torn last line, to ``quarantine.jsonl``;
    the number moved. A lost ``intent`` means its batch is never merged and its requests are sent again
    (paid twice, nothing lost); a lost ``file`` or ``batch`` id is found again by listing."""
    from .batch_journal import JOURNAL, event_problem

    path = run_dir / JOURNAL
    if not path.exists():
        return 0
    data = path.read_bytes()
    lines = data.split(b"\n")
    keep, bad = [], []
    for i, line in enumerate(lines, 1):
        torn = i == len(lines)
        why = ("torn last line (a kill mid-write)" if torn else event_problem(line)) if line.strip() else None
        (bad if why else keep).append((i, line, why) if why else line)
    if bad:
        quarantine(run_dir, bad, source=JOURNAL)
        atomic_write_bytes(path, b"".join(line + b"\n" for line in keep if line.strip()))
        if QUARANTINE not in set_aside:
            set_aside.insert(0, QUARANTINE)
    return len(bad)


def repair_run(run_dir, manifest_from=None) -> dict:
    """Make a damaged run directory resumable again, losing nothing.

    - a line that is not a record of the schema (:func:`~moralkit.collect.record_files.schema_problem`) is
      fixed when that needs no guess (an ``attempt`` written as ``"3"``), else moved to ``quarantine.jsonl``,
      as is a torn last line;
    - of several attempt records with one ``(task, attempt)`` (two collectors on one run), the first
      is kept and the others move to ``quarantine.jsonl``;
    - when ``records.jsonl`` and ``records.jsonl.gz`` disagree, their records are merged (the
      ``.gz``'s missing ones appended); a ``.gz`` that is truncated or damaged gives every record it
      still holds, and is set aside as ``records.jsonl.gz.corrupt-<time>``, not deleted;
    - ``records.jsonl`` and ``records.jsonl.gz`` are then rewritten atomically;
    - ``manifest_from`` (a run directory or a ``manifest.json``) gives a run without a manifest the
      manifest of the run it belongs to, after checking that every record agrees with it (survey,
      label, backend, model, ...); sessions and end times are not copied.

    Holds the run's lock, so it refuses to run while a collector writes to the directory. The phases are
    listed in the module docstring.

    Returns
    -------
    dict
        ``kept`` (records), ``quarantined`` (lines moved), ``fixed`` (lines fixed in place), ``reasons``
        (Counter), ``merged_from_gz``, ``set_aside`` (files written or renamed to keep what was moved),
        ``manifest_from``, and ``problem``: why the run still cannot resume (``None`` when it can).

    Examples
    --------
    ``python -m moralkit repair data/raw/psm-mymodel`` from the command line.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunNotFoundError(f"{run_dir} is not a run directory (no such directory): give the directory of the "
                               "run to repair (the --out of its collection)")
    if manifest_from is not None and (run_dir / MANIFEST).exists():
        raise MoralkitError(f"{run_dir} already has a {MANIFEST}; --manifest-from only gives one to a run that has none")
    lock = RunLock(run_dir)
    try:
        remove_stale_temporaries_in(run_dir)
        data, packed, set_aside = _read_copies(run_dir)
        items, merged = _candidate_lines(data, packed)
        t = _triage(run_dir, items)
        _write_back(run_dir, t, data, packed, set_aside)
        if manifest_from is not None:
            _adopt_manifest(run_dir, manifest_from, t.good)
        journal = _repair_journal(run_dir, set_aside)
    finally:
        lock.release()
    return dict(kept=len(t.keep), quarantined=len(t.bad), fixed=t.fixed, reasons=dict(t.reasons), journal_quarantined=journal,
                merged_from_gz=merged, set_aside=set_aside,
                manifest_from=None if manifest_from is None else str(manifest_from), problem=check_resumable(run_dir))
