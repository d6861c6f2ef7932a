"""The batch journal of a run directory (``batches.jsonl``): every submission and what became of it.

One fsynced JSON line per event, written in the run's lock, in this order for each submission
``<sub>`` (see :mod:`moralkit.collect.batch` for why a kill at any moment loses nothing and sends nothing
twice): ``intent`` (the token, its ``custom_id`` → ``(task, attempt)`` slots and seeds, written *before*
anything is uploaded; the exact input lines are in ``batches/<sub>.input.jsonl``), ``file`` (OpenAI's
uploaded file id), ``batch`` (the batch id), ``ended`` (final status and counts; the result files are
saved under ``batches/``), ``merged`` (every result is in ``records.jsonl``), and ``foreign`` (a batch
adopted by mistake, not ours: look again).

:class:`Journal` reads and appends it for a collector; :func:`batch_state` reads it for a status table.
Both are also importable from :mod:`moralkit.collect.batch`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..errors import DataError
from .provenance import utc_now

__all__ = ["Journal", "batch_state", "age_text", "event_problem", "journal_problem", "EVENTS", "JOURNAL", "BATCH_DIR"]

JOURNAL = "batches.jsonl"
BATCH_DIR = "batches"


def _fsync_append(path: Path, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


#: The events a journal line can hold (the module docstring says when each is written).
EVENTS = ("intent", "file", "batch", "ended", "merged", "foreign")


def event_problem(line: bytes) -> str | None:
    """Why one line of ``batches.jsonl`` is not a journal event (``None`` when it is one)."""
    try:
        e = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(e, dict):
        return f"a JSON {type(e).__name__}, not an object"
    if e.get("event") not in EVENTS:
        return f"event {e.get('event')!r} is none of {', '.join(EVENTS)}"
    need = ("sub",) + {"file": ("file_id",), "batch": ("batch_id",), "foreign": ("batch_id",)}.get(e["event"], ())
    missing = [k for k in need if k not in e]
    return f"a {e['event']!r} event without {', '.join(map(repr, missing))}" if missing else None


def journal_problem(run_dir, data: bytes | None = None) -> str | None:
    """Why the batch journal of ``run_dir`` cannot be read (a complete line that is not an event), with
    the fix; ``None`` when it can, or when there is none. Read-only: a torn last line is not looked at."""
    path = Path(run_dir) / JOURNAL
    if data is None:
        if not path.exists():
            return None
        data = path.read_bytes()
    for i, line in enumerate(data.split(b"\n")[:-1], 1):
        why = event_problem(line)
        if why is not None:
            return (f"{path}, line {i}: not a journal event ({why}); run `python -m moralkit repair {Path(run_dir)}` "
                    "to move it to quarantine.jsonl and resume (do not delete the file: the batches it names are "
                    "listed in its other lines)")
    return None


class Journal:
    """The run's batch journal (``batches.jsonl``): submissions and what became of them.

    A torn last line (a kill mid-write) is cut on open: every event is written *before* the
    action it announces is known to be safe to forget (an intent before the upload) or *after*
    the action it records (a file or batch id), and a lost id is found again by listing.
    """

    def __init__(self, run_dir):
        self.dir = Path(run_dir)
        self.path = self.dir / JOURNAL
        self.files = self.dir / BATCH_DIR
        self.files.mkdir(parents=True, exist_ok=True)
        self.events: list[dict] = []
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                with open(self.path, "rb+") as f:
                    f.truncate(cut)
                    os.fsync(f.fileno())
                data = data[:cut]
            why = journal_problem(self.dir, data)
            if why is not None:
                raise DataError(why)
            self.events = [json.loads(line) for line in data.split(b"\n")[:-1]]

    def append(self, event: dict) -> None:
        event = dict(event, at=utc_now())
        _fsync_append(self.path, (json.dumps(event, ensure_ascii=True) + "\n").encode())
        self.events.append(event)

    def submissions(self) -> dict:
        """``sub -> state`` (``intent``, ``file_id``, ``batch_id``, ``ended``, ``merged``, ``foreign``)."""
        subs: dict = {}
        for e in self.events:
            s = e.get("sub")
            if e["event"] == "intent":
                subs[s] = dict(intent=e, file_id=None, batch_id=None, ended=None, merged=False, foreign=set())
            elif s in subs:
                st = subs[s]
                if e["event"] == "file":
                    st["file_id"] = e["file_id"]
                elif e["event"] == "batch":
                    st["batch_id"] = e["batch_id"]
                elif e["event"] == "ended":
                    st["ended"] = e
                elif e["event"] == "merged":
                    st["merged"] = True
                elif e["event"] == "foreign":  # a batch adopted by mistake (not ours): look again
                    st["foreign"].add(e["batch_id"])
                    st["batch_id"] = None
                    st["ended"] = None
        return subs

    def known_batch_ids(self) -> set:
        return {e["batch_id"] for e in self.events if e["event"] == "batch"}


def batch_state(run_dir) -> dict:
    """What the batch journal of ``run_dir`` says, read only: ``submissions``, ``open`` (submitted, not
    merged), ``requests_open``, ``ids`` of the open batches, and ``text``, a one-line summary for a status
    table (empty when the run has no journal)."""
    path = Path(run_dir) / JOURNAL
    out = dict(submissions=0, open=0, requests_open=0, ids=[], text="")
    if not path.exists():
        return out
    subs: dict = {}
    for line in path.read_bytes().split(b"\n")[:-1]:  # a torn last line is not an event yet
        try:
            e = json.loads(line)
        except ValueError:
            continue
        s = e.get("sub")
        if e.get("event") == "intent":
            subs[s] = dict(n=len(e.get("requests", [])), unix=e.get("unix", 0), batch=None, ended=None, merged=False)
        elif s in subs:
            if e["event"] == "batch":
                subs[s]["batch"] = e["batch_id"]
            elif e["event"] == "ended":
                subs[s]["ended"] = e.get("status")
            elif e["event"] == "merged":
                subs[s]["merged"] = True
            elif e["event"] == "foreign":
                subs[s]["batch"] = None
    opened = [v for v in subs.values() if not v["merged"]]
    out.update(submissions=len(subs), open=len(opened), requests_open=sum(v["n"] for v in opened),
               ids=[v["batch"] for v in opened if v["batch"]])
    parts = [f"{len(subs)} submitted"]
    for v in opened[:3]:
        st = "ended, not merged" if v["ended"] else ("running" if v["batch"] else "not uploaded")
        parts.append(f"{v['batch'] or 'pending'}: {st}, {v['n']} requests, age {age_text(time.time() - v['unix'])}")
    if len(opened) > 3:
        parts.append(f"... {len(opened) - 3} more open")
    if not opened:
        parts.append("all merged")
    out["text"] = "; ".join(parts)
    return out



def age_text(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (the age of a batch in status lines)."""
    s = int(max(0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"

