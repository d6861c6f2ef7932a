"""The files of a run directory, read and written strictly: records, their gzip copy, the manifest, the quarantine.

A record is one JSON object on one line of ``records.jsonl`` (:func:`schema_problem` says what makes it one);
``records.jsonl.gz`` is the compressed copy committed to git (:func:`gzip_bytes`, deterministic);
``manifest.json`` is the run's identity (:func:`read_manifest`); ``quarantine.jsonl`` keeps, byte for byte,
every line a repair or a resume moved out of the records (:func:`quarantine`). Reading is strict: a line
that is not a record is named with its file, its line and the fix (:class:`CorruptRecordsError`), and only
a torn last line (a writer killed mid-``write``) is left out.

:class:`moralkit.collect.store.RecordStore` writes these files; :func:`moralkit.collect.repair.repair_run`
mends them. The reading functions are also importable from :mod:`moralkit.collect.store`.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from pathlib import Path

from ..errors import DataError, MoralkitError
from .provenance import utc_now

__all__ = ["RECORDS", "RECORDS_GZ", "MANIFEST", "QUARANTINE", "CorruptRecordsError", "RunNotFoundError",
           "schema_problem",
           "read_records", "read_manifest", "distinct_runs", "check_run_dir", "index_attempts", "gunzip_records",
           "record_line", "gzip_bytes", "quarantine"]

RECORDS = "records.jsonl"
RECORDS_GZ = "records.jsonl.gz"
MANIFEST = "manifest.json"
QUARANTINE = "quarantine.jsonl"


class CorruptRecordsError(DataError):
    """A records file holds a line that is not a record, or a duplicated ``(task, attempt)``.

    The message names the file, the line and the fix (``python -m moralkit repair RUN``).
    """


class RunNotFoundError(DataError, FileNotFoundError):
    """A run directory, its ``manifest.json`` or a records file does not exist.

    A :class:`~moralkit.errors.DataError` (so a ``MoralkitError`` and a ``ValueError``) that is also a
    :class:`FileNotFoundError`, as these errors were before they joined the ``MoralkitError`` family.
    """


#: The fix every "no such run" message ends with.
_GIVE_A_RUN = "give the directory a collection wrote (its --out), or check the path"


def schema_problem(rec: dict) -> str | None:
    """What makes a decoded JSON object not a record, or ``None``.

    A record has ``kind`` ``"attempt"`` (the default) or ``"error"``, a non-empty string ``task`` and a
    positive integer ``attempt``; an attempt has a ``status`` string (sampled answers) or a ``forms``
    object (a scenario scored by a local model).

    Examples
    --------
    >>> schema_problem({"task": "r001", "attempt": None, "status": "ok"})
    "'attempt' is None, not a positive integer"
    """
    kind = rec.get("kind", "attempt")
    if kind not in ("attempt", "error"):
        return f"'kind' is {kind!r}, not 'attempt' or 'error'"
    if "task" not in rec:
        return "no 'task'"
    if not isinstance(rec["task"], str) or not rec["task"]:
        return f"'task' is {rec['task']!r}, not a non-empty string"
    if "attempt" not in rec:
        return "no 'attempt'"
    a = rec["attempt"]
    if isinstance(a, bool) or not isinstance(a, int) or a < 1:
        return f"'attempt' is {a!r}, not a positive integer"
    if kind == "attempt":
        if "status" in rec:
            if not isinstance(rec["status"], str):
                return f"'status' is {rec['status']!r}, not a string"
        elif not isinstance(rec.get("forms"), dict):
            return "no 'status' (nor 'forms')"
    return None


def _decode_lines(data: bytes, where: str, strict: bool = True):
    """Records and problems of a JSONL byte string.

    A last line without its newline is a torn write (a writer killed mid-``write``): it is returned
    as ``torn`` and never counted as corrupt. Any other line that is not a JSON object is corrupt:
    with ``strict`` a :class:`CorruptRecordsError` names it; else it is returned in ``bad``.
    """
    records, bad = [], []
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the data ends with a newline
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise DataError(f"a JSON {type(rec).__name__}, not an object")
            why = schema_problem(rec)
            if why is not None:
                raise DataError(f"a JSON object of the wrong schema: {why}")
        except ValueError as e:
            if strict:
                raise CorruptRecordsError(
                    f"{where}, line {i}: not a record ({str(e)[:120]}); the {len(lines) - i} line(s) after it "
                    f"are intact. Run `python -m moralkit repair {Path(where).parent}` to fix the line or move it "
                    f"to {QUARANTINE} (nothing is deleted), then resume.") from None
            bad.append((i, line))
            continue
        records.append((i, rec))
    return records, bad, torn


def gunzip_records(path: Path) -> bytes:
    """The bytes of a complete ``records.jsonl.gz``; a :class:`CorruptRecordsError` naming the fix when it is
    truncated or damaged (:func:`moralkit.collect.repair.repair_run` recovers what such a file still holds)."""
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise CorruptRecordsError(
            f"{path} is not a complete gzip file ({e}); restore it from git (`git checkout -- {path}`) or, if "
            f"{RECORDS} is complete, run `python -m moralkit repair {path.parent}`") from None


def _record_bytes(path: Path) -> bytes:
    """The raw bytes of a run directory's records: ``records.jsonl``, or the longer ``.gz`` it is a prefix of."""
    if path.is_dir():
        jl, gz = path / RECORDS, path / RECORDS_GZ
        if jl.exists():
            data = jl.read_bytes()
            if gz.exists():
                packed = gunzip_records(gz)
                if len(packed) > len(data) and packed.startswith(data):
                    return packed  # an interrupted unpack (older versions) left a short copy
            return data
        path = gz
    if not path.exists():
        raise RunNotFoundError(f"no records at {path}: {_GIVE_A_RUN}, a records.jsonl or a records.jsonl.gz")
    return gunzip_records(path) if path.suffix == ".gz" else path.read_bytes()


def read_manifest(path) -> dict:
    """The manifest of a run directory (or a ``manifest.json`` path) as a dict; a clear
    :class:`~moralkit.errors.DataError` naming the file and the fix when it is missing or not an object."""
    path = Path(path)
    if not path.exists():
        raise RunNotFoundError(f"{path} is not a run directory (no such directory): {_GIVE_A_RUN}")
    f = path / MANIFEST if path.is_dir() else path
    run = f.parent
    fix = (f"restore it (`git checkout -- {f}`), or give the run the manifest of the run it belongs to with "
           f"`python -m moralkit repair {run} --manifest-from OTHER_RUN_OR_MANIFEST`")
    if not f.exists():
        raise RunNotFoundError(f"{run} is not a run directory (no {MANIFEST}): {_GIVE_A_RUN}; a run that lost its "
                               f"manifest gets one with `python -m moralkit repair {run} --manifest-from OTHER_RUN`")
    try:
        m = json.loads(f.read_bytes())
    except ValueError as e:
        raise DataError(f"{f} is not valid JSON ({str(e)[:80]}): {fix}") from None
    if not isinstance(m, dict):
        raise DataError(f"{f} holds a JSON {type(m).__name__}, not an object: {fix}")
    return m


def distinct_runs(run_dirs) -> list:
    """``run_dirs`` as a list, refusing a run directory given twice (its records would be counted twice)."""
    if isinstance(run_dirs, (str, os.PathLike)):
        run_dirs = [run_dirs]
    run_dirs = list(run_dirs)
    seen = {}
    for d in run_dirs:
        key = Path(d).resolve()
        if key in seen:
            raise MoralkitError(f"the run directory {d} is given twice (also as {seen[key]}): each run's records "
                                "would be exported twice; give each run once")
        seen[key] = d
    if not run_dirs:
        raise MoralkitError("no run directory given")
    return run_dirs


def read_records(path, strict: bool = True) -> list[dict]:
    """Records of a run directory, a ``records.jsonl`` or a ``records.jsonl.gz`` file.

    A torn last line (a writer killed mid-write, or one writing right now) is left out. A corrupt
    line anywhere else raises :class:`CorruptRecordsError` naming the file and line (``strict``),
    instead of hiding every record after it.
    """
    path = Path(path)
    where = str(path / RECORDS if path.is_dir() else path)
    recs, _, _ = _decode_lines(_record_bytes(path), where, strict=strict)
    return [r for _, r in recs]


def check_run_dir(run_dir: Path) -> None:
    """Refuse a ``run_dir`` that is a file (a :class:`~moralkit.errors.MoralkitError` naming the fix)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise MoralkitError(f"{run_dir} is a file, not a run directory: pass a directory (a new one for a new "
                            "run, or the directory of the run to resume)")


def index_attempts(records, path: Path, run_dir: Path) -> tuple[dict, dict]:
    """``((task, attempt) -> record, task -> [records])`` of the attempt records (error records are not
    attempts); a :class:`CorruptRecordsError` naming the fix on a duplicated ``(task, attempt)``."""
    keys: dict[tuple, dict] = {}
    by_task: dict[str, list] = {}
    for r in records:
        if r.get("kind", "attempt") != "attempt":
            continue
        k = (r["task"], int(r["attempt"]))
        if k in keys:
            raise CorruptRecordsError(
                f"{path}: duplicate record for task {k[0]!r} attempt {k[1]} (two collectors wrote to "
                f"this run?). Run `python -m moralkit repair {run_dir}` to keep the first and quarantine "
                "the others, then resume.")
        keys[k] = r
        by_task.setdefault(r["task"], []).append(r)
    return keys, by_task


def record_line(record: dict) -> bytes:
    """One JSON line, UTF-8. Text UTF-8 cannot hold (lone surrogates from a broken response) is kept
    losslessly as JSON ``\\uXXXX`` escapes instead of failing the write."""
    try:
        return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record, ensure_ascii=True, default=str) + "\n").encode("ascii")


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip (no file name, mtime 0, level 9)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return buf.getvalue()


def quarantine(run_dir: Path, items, source: str = RECORDS) -> int:
    """Append ``(line number, raw bytes, reason)`` items to ``quarantine.jsonl`` (durably); the number appended.
    The bytes are kept exactly: ``text`` decodes them with ``surrogateescape``
    (``text.encode("utf-8", "surrogateescape")`` gives them back)."""
    items = [(n, b, why) for n, b, why in items if b.strip()]
    if not items:
        return 0
    now = utc_now()
    out = b"".join((json.dumps({"quarantined": now, "source": source, "line": n, "reason": why,
                                "text": b.decode("utf-8", "surrogateescape")}, ensure_ascii=True) + "\n").encode()
                   for n, b, why in items)
    fd = os.open(run_dir / QUARANTINE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, out)
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(items)
