"""The append-only record store: durability, torn-line repair, duplicates, manifests, resume from gzip."""

import gzip
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit.collect.store import RecordStore, derive_seed, prompt_sha256, read_records


def _rec(task, attempt, **kw):
    return dict(kind="attempt", task=task, attempt=attempt, raw=f"Option {attempt}", status="ok", **kw)


M = dict(survey="psm", label="x", model="m")


def test_append_and_reload(tmp_path):
    with RecordStore(tmp_path, M, identity_keys=("survey", "label")) as s:
        s.append(_rec("r001", 1))
        s.append(_rec("r001", 2))
        s.append(dict(kind="error", task="r002", attempt=1, error="timeout"))
        s.append(_rec("r002", 1))
    s = RecordStore(tmp_path, M, identity_keys=("survey", "label"))
    assert [r["attempt"] for r in s.attempts("r001")] == [1, 2]
    assert s.has("r002", 1) and not s.has("r003", 1)
    assert len(s.records) == 4 and len(s.manifest["sessions"]) == 0
    s.close()


def test_duplicate_attempt_is_refused(tmp_path):
    with RecordStore(tmp_path, M) as s:
        s.append(_rec("r001", 1))
        with pytest.raises(ValueError, match="already stored"):
            s.append(_rec("r001", 1))


def test_duplicate_on_disk_is_detected(tmp_path):
    RecordStore(tmp_path, M).close()
    line = json.dumps(_rec("r001", 1)) + "\n"
    (tmp_path / "records.jsonl").write_text(line + line)
    with pytest.raises(ValueError, match="duplicate record"):
        RecordStore(tmp_path, M)


@pytest.mark.parametrize("cut", [1, 10, 40])
def test_torn_last_line_is_cut(tmp_path, cut):
    with RecordStore(tmp_path, M) as s:
        s.append(_rec("r001", 1))
        s.append(_rec("r002", 1))
    p = tmp_path / "records.jsonl"
    data = p.read_bytes()
    torn = json.dumps(_rec("r003", 1)).encode()[:cut]
    p.write_bytes(data + torn)  # a writer killed in the middle of a line
    assert len(read_records(p)) == 2
    with RecordStore(tmp_path, M) as s:
        assert len(s.records) == 2 and not s.has("r003", 1)
        s.append(_rec("r003", 1))
    assert [r["task"] for r in read_records(tmp_path)] == ["r001", "r002", "r003"]


def test_identity_mismatch_and_sessions(tmp_path):
    RecordStore(tmp_path, dict(M, session={"n": 1}), identity_keys=("survey", "label")).close()
    s = RecordStore(tmp_path, dict(M, session={"n": 2}), identity_keys=("survey", "label"))
    assert [x["n"] for x in s.manifest["sessions"]] == [1, 2]
    s.close()
    # a run that holds no answer yet (e.g. its first request was refused for a parameter) may change
    s = RecordStore(tmp_path, dict(M, label="z", session={"n": 3}), identity_keys=("survey", "label"))
    assert s.manifest["label"] == "z" and s.manifest["sessions"][-1]["replaced_identity"] == {"label": M["label"]}
    s.append(_rec("r001", 1))
    s.close()
    with pytest.raises(ValueError, match="label='z', not 'y'"):  # one with answers may not
        RecordStore(tmp_path, dict(M, label="y"), identity_keys=("survey", "label"))


def test_resume_from_committed_gzip(tmp_path):
    with RecordStore(tmp_path, M) as s:
        s.append(_rec("r001", 1))
        gz = s.compress()
    raw = gz.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # mtime 0: deterministic bytes
    os.remove(tmp_path / "records.jsonl")  # a fresh checkout only has the .gz
    with RecordStore(tmp_path, M) as s:
        assert s.has("r001", 1)
        s.append(_rec("r002", 1))
    assert len(read_records(tmp_path / "records.jsonl")) == 2
    assert [json.loads(line)["task"] for line in gzip.open(gz, "rt")] == ["r001"]


def test_a_long_session_refreshes_the_compressed_copy(tmp_path, monkeypatch):
    """A machine lost mid-session keeps what the last refresh of records.jsonl.gz holds, not only what
    earlier sessions finished (the .gz is what is committed or synced)."""
    import moralkit.collect.store as store_mod

    clock = [1000.0]
    monkeypatch.setattr(store_mod.time, "monotonic", lambda: clock[0])
    with pytest.raises(ValueError, match="compress_every_s"):
        RecordStore(tmp_path / "bad", M, compress_every_s=-1)
    s = RecordStore(tmp_path, M, compress_every_s=60)
    gz = tmp_path / "records.jsonl.gz"
    s.append(_rec("r001", 1))
    assert not gz.exists()  # less than 60 s since the session started
    clock[0] += 61
    s.append(_rec("r002", 1))
    assert [r["task"] for r in read_records(gz)] == ["r001", "r002"]
    clock[0] += 30
    s.append(_rec("r003", 1))
    assert len(read_records(gz)) == 2  # the next refresh is due 60 s after the last one
    s.close()
    with RecordStore(tmp_path / "off", M, compress_every_s=None) as s2:
        clock[0] += 10_000
        s2.append(_rec("r001", 1))
    assert not (tmp_path / "off" / "records.jsonl.gz").exists()


def test_readonly_does_not_touch_files(tmp_path):
    with RecordStore(tmp_path, M) as s:
        s.append(_rec("r001", 1))
    p = tmp_path / "records.jsonl"
    p.write_bytes(p.read_bytes() + b'{"kind": "att')  # a writer is mid-line right now
    before = p.read_bytes()
    r = RecordStore(tmp_path, readonly=True)
    assert len(r.records) == 1 and p.read_bytes() == before
    with pytest.raises(ValueError, match="read-only"):
        r.append(_rec("r002", 1))


def test_new_run_needs_manifest(tmp_path):
    with pytest.raises(ValueError, match="manifest"):
        RecordStore(tmp_path)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**40), st.text(max_size=20), st.integers(1, 3))
def test_derive_seed_is_stable_31_bit(seed, task, attempt):
    a = derive_seed(seed, task, attempt)
    assert a == derive_seed(seed, task, attempt) and 0 <= a < 2**31


def test_derive_seed_known_value_and_prompt_hash():
    # fixed values: changing them silently would change every collected sample
    assert derive_seed(0, "r001", 1) == 1471399271
    assert prompt_sha256([{"role": "user", "content": "x"}]) == prompt_sha256([{"content": "x", "role": "user"}])


def test_the_store_imports_without_fcntl_and_locks_with_filelock(tmp_path):
    """Windows has no fcntl: ``import moralkit.collect`` must not need it (platform simulated by blocking the
    module in a fresh interpreter); the run lock is a filelock lock whose holder is named."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; sys.modules['fcntl'] = None\n"
            "import moralkit.collect, moralkit.collect.store as s\n"
            "assert 'fcntl' not in vars(s)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr[-2000:]

    from moralkit.collect.store import LOCK_HOLDER, RunLockedError

    with RecordStore(tmp_path, dict(survey="x")):
        assert json.loads((tmp_path / LOCK_HOLDER).read_text())["pid"] == os.getpid()
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()} on host"):
            RecordStore(tmp_path, dict(survey="x"))
    assert not (tmp_path / LOCK_HOLDER).exists()  # released on close


def test_missing_runs_and_bad_settings_are_moralkit_errors(tmp_path):
    """Issue 29: a run directory, manifest or records file that does not exist is a MoralkitError naming the
    fix, and still a FileNotFoundError (as it was); a compress interval that is not a number is refused."""
    from moralkit.collect.store import read_manifest, repair_run
    from moralkit.errors import MoralkitError

    for call in (lambda: read_manifest(tmp_path / "nowhere"), lambda: read_manifest(tmp_path),
                 lambda: read_records(tmp_path / "nowhere.jsonl"), lambda: repair_run(tmp_path / "nowhere")):
        with pytest.raises(MoralkitError, match="give the directory") as e:
            call()
        assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(MoralkitError, match="compress_every_s must be None or >= 0 seconds"):
        RecordStore(tmp_path / "r", M, compress_every_s="often")


def _journal_run(tmp_path, middle: bytes, torn: bytes = b""):
    with RecordStore(tmp_path, M) as s:
        s.append(_rec("r001", 1))
    good = [json.dumps(dict(event="intent", sub="s1", requests=[])).encode(),
            json.dumps(dict(event="batch", sub="s1", batch_id="batch_1")).encode()]
    (tmp_path / "batches.jsonl").write_bytes(good[0] + b"\n" + middle + b"\n" + good[1] + b"\n" + torn)
    return good


@pytest.mark.parametrize("middle,why", [(b'{"event": "intent", "sub": "s', "not JSON"),
                                        (b"[1, 2]", "a JSON list"),
                                        (b'{"event": "launched", "sub": "s1"}', "none of intent"),
                                        (b'{"event": "batch", "sub": "s1"}', "without 'batch_id'")])
def test_a_damaged_batch_journal_line_is_named_with_its_fix_and_repair_sets_it_aside(tmp_path, middle, why):
    from moralkit.collect.batch_journal import Journal
    from moralkit.collect.repair import check_resumable, repair_run
    from moralkit.errors import DataError

    good = _journal_run(tmp_path, middle, torn=b'{"event": "mer')
    with pytest.raises(DataError, match=rf"batches.jsonl, line 2: not a journal event \(.*{why}.*moralkit repair"):
        Journal(tmp_path)  # (this cuts the torn last line, as a collector would)
    (tmp_path / "batches.jsonl").write_bytes((tmp_path / "batches.jsonl").read_bytes() + b'{"event": "mer')
    assert "batches.jsonl, line 2" in check_resumable(tmp_path)
    r = repair_run(tmp_path)
    assert r["journal_quarantined"] == 2 and r["problem"] is None and "quarantine.jsonl" in r["set_aside"]
    assert (tmp_path / "batches.jsonl").read_bytes() == good[0] + b"\n" + good[1] + b"\n"
    q = [json.loads(x) for x in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    assert [(x["source"], x["line"], x["text"].encode()) for x in q] == [
        ("batches.jsonl", 2, middle), ("batches.jsonl", 4, b'{"event": "mer')]  # kept byte for byte
    assert [e["event"] for e in Journal(tmp_path).events] == ["intent", "batch"]


def test_repair_leaves_a_sound_batch_journal_alone(tmp_path):
    from moralkit.collect.repair import repair_run

    _journal_run(tmp_path, json.dumps(dict(event="file", sub="s1", file_id="file_1")).encode())
    before = (tmp_path / "batches.jsonl").read_bytes()
    r = repair_run(tmp_path)
    assert r["journal_quarantined"] == 0 and (tmp_path / "batches.jsonl").read_bytes() == before
    assert not (tmp_path / "quarantine.jsonl").exists()


def test_the_repair_command_says_how_many_journal_lines_it_moved(tmp_path, capsys):
    from moralkit.cli import main

    _journal_run(tmp_path, b"not json")
    assert main(["repair", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 batch-journal lines moved to quarantine.jsonl" in out and "The run is resumable" in out
