"""The journal of :mod:`moralkit.psm.hm_table1`: every decided random dataset, appended as it is decided.

Table 1's Houtman–Maks column takes hours on near-random answers (7 respondents x 1,000 random
datasets), so the command writes one JSON line per result to ``table1_hm_journal.jsonl`` and a re-run
skips what the journal holds. The lines, in order:

``{"kind": "inputs", ...}``
    The first line: what the results depend on (the SHA-256 of every PSM data file, the seed, the
    number of random datasets, the time limits). A run whose request differs is refused
    (:class:`~moralkit.errors.MoralkitError`), so that one journal never mixes two computations.
``{"kind": "start", ...}``
    One per run of the command: UTC time, PID, ``n_jobs``, load average, command line.
``{"kind": "own", "model": ..., ...}``
    A respondent's own HM count (``n_kept``, proven upper bound ``n_upper``, ``n_obs``) and its seconds.
``{"kind": "decision", "model": ..., "dataset": i, ...}``
    Random dataset ``i``'s decision (1: HM at least the respondent's, 0: below, -1: undecided within the
    time limit), what decided it (``bound``, ``greedy``, ``exact``), its wall and CPU seconds, and
    the UTC time ``at`` (seconds since the epoch) it was written.

Each line is written whole, flushed and fsynced, so a killed run loses at most the decisions in
flight; a torn last line (killed mid-write) is ignored on reading and cut off before the next run
appends. One run at a time writes a journal (an exclusive lock on ``<journal>.lock``, held with
:mod:`filelock` as the collectors' run lock is); reading needs no lock.

References
----------
Seror (2025), Section 2.3 (Procedure 1, eq. (4)); Houtman and Maks (1985).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MoralkitError

__all__ = ["JOURNAL_NAME", "Journal", "JournalState", "read_journal"]

#: The journal's file name, beside the table it builds (:func:`moralkit.psm.hm_table1.default_dir`).
JOURNAL_NAME = "table1_hm_journal.jsonl"

#: The request fields that must match for a run to continue a journal.
INPUT_KEYS = ("input_sha256", "seed", "n_datasets", "time_limit_s", "own_time_limit_s")


@dataclass
class JournalState:
    """What a journal holds: its inputs, the runs that wrote it, each respondent's own HM and decisions.

    ``own[model]`` is the ``own`` record; ``decisions[model][i]`` the ``decision`` record of random dataset ``i``.
    """

    inputs: dict | None = None
    starts: list = field(default_factory=list)
    own: dict = field(default_factory=dict)
    decisions: dict = field(default_factory=dict)
    records: list = field(default_factory=list)  # every record, in order (sessions' spans)

    def add(self, rec: dict, where: str = "journal") -> None:
        kind = rec.get("kind")
        if kind == "inputs":
            if self.inputs is not None:
                raise MoralkitError(f"{where}: a second 'inputs' line; a journal holds one computation")
            self.inputs = {k: rec.get(k) for k in INPUT_KEYS}
        elif self.inputs is None:
            raise MoralkitError(f"{where}: the first line is not the 'inputs' line; this is not a moralkit "
                                "hm_table1 journal (move it aside)")
        elif kind == "start":
            self.starts.append(rec)
        elif kind == "own":
            self.own.setdefault(rec["model"], rec)
        elif kind == "decision":
            mine = self.decisions.setdefault(rec["model"], {})
            i = int(rec["dataset"])
            if not 0 <= i < int(self.inputs["n_datasets"]):
                raise MoralkitError(f"{where}: random dataset {i} of {rec['model']} is outside "
                                    f"0..{int(self.inputs['n_datasets']) - 1}")
            old = mine.setdefault(i, rec)
            if int(old["decision"]) != int(rec["decision"]):
                raise MoralkitError(f"{where}: random dataset {i} of {rec['model']} has two different "
                                    f"decisions ({old['decision']}, {rec['decision']}); the journal is corrupt")
        else:
            raise MoralkitError(f"{where}: unknown record kind {kind!r}")
        self.records.append(rec)

    def n_done(self, model: str) -> int:
        return len(self.decisions.get(model, {}))


def _complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete (newline-terminated) lines of ``data`` and the length they take."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def read_journal(path, max_lines: int | None = None) -> JournalState:
    """Read a journal (a torn last line, from a killed writer, is ignored); only its first ``max_lines``
    lines when given (what a table built earlier from it saw: ``journal_lines`` of ``table1_hm.json``).

    Raises
    ------
    MoralkitError
        The file is not a journal of :mod:`moralkit.psm.hm_table1`, or a complete line is not JSON.
    """
    path = Path(path)
    st = JournalState()
    lines, _ = _complete_lines(path.read_bytes())
    for n, line in enumerate(lines[:max_lines], 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise MoralkitError(f"{path}, line {n}: not JSON ({e}); the journal is corrupt: move it aside "
                                "and re-run") from None
        st.add(rec, f"{path}, line {n}")
    return st


def _differences(have: dict, want: dict) -> list[str]:
    out = []
    for k in INPUT_KEYS:
        if k == "input_sha256" and have.get(k) != want.get(k):
            a, b = have.get(k) or {}, want.get(k) or {}
            files = sorted(set(a) ^ set(b) | {f for f in a if f in b and a[f] != b[f]})
            out.append(f"the PSM data files differ ({', '.join(files)})")
        elif k != "input_sha256" and have.get(k) != want.get(k):
            out.append(f"{k}: journal {have.get(k)!r}, this run {want.get(k)!r}")
    return out


class Journal:
    """An open journal: :meth:`append` writes one record durably. ``path=None`` keeps it in memory.

    Opening an existing journal checks that its inputs equal ``inputs`` and takes an exclusive lock.

    Raises
    ------
    MoralkitError
        The journal's inputs differ from ``inputs`` (the message names each difference), or another
        run is writing it.
    """

    def __init__(self, path, inputs: dict):
        self.path = Path(path) if path is not None else None
        self.inputs = {k: inputs.get(k) for k in INPUT_KEYS}
        for k in ("time_limit_s", "own_time_limit_s"):  # 30 and 30.0 are one request (and one JSON value)
            self.inputs[k] = None if self.inputs[k] is None else float(self.inputs[k])
        self.state = JournalState()
        self._f = None
        self._held = None
        if self.path is None:
            self.append({"kind": "inputs", **self.inputs})
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a+b")
        try:
            self._lock()
            self._f.seek(0)
            data = self._f.read()
            if data:
                self.state = read_journal(self.path)
                diff = _differences(self.state.inputs, self.inputs)
                if diff:
                    raise MoralkitError(
                        f"{self.path} holds another computation: {'; '.join(diff)}. Re-run with the journal's "
                        "options to continue it, or pass --journal NEW_PATH (or move this one aside) to start "
                        "a new one")
                _, end = _complete_lines(data)
                if end < len(data):  # a torn last line from a killed run
                    self._f.truncate(end)
            else:
                self.append({"kind": "inputs", **self.inputs})
        except BaseException:
            self.close()
            raise

    def _lock(self) -> None:
        # filelock, as the collectors' RunLock: flock on POSIX, msvcrt.locking on Windows
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.path) + ".lock", timeout=0)
        try:
            lock.acquire()
            self._held = lock
        except Timeout:
            raise MoralkitError(f"another run is writing {self.path} (its PID is in the journal's last 'start' "
                                "line); wait for it to finish or stop it, then re-run") from None

    def append(self, rec: dict) -> None:
        """Add a record and write it as one line: flushed and fsynced before returning."""
        self.state.add(rec)
        if self._f is not None:
            self._f.write((json.dumps(rec, separators=(",", ":")) + "\n").encode())
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        if self._held is not None:
            self._held.release()
            self._held = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
