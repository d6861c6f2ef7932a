"""Strict readers: bad PSM and MoralChoice files are rejected with one message naming the file, the row
and the fix, instead of being accepted silently or failing with a raw pandas/gzip error."""

import gzip

import pandas as pd
import pytest

from moralkit.moralchoice.responses import read_responses
from moralkit.paths import data_dir
from moralkit.psm.dataset import read_psm

PSM = data_dir() / "psm" / "qwen2.5-coder-0.5b-instruct.csv.gz"
MC = data_dir() / "moralchoice" / "qwen2.5-coder-0.5b-instruct-low.csv.gz"


def _frame(f):
    return pd.read_csv(f, dtype=str, keep_default_na=False)


def _edit(df, row, col, value):
    df = df.copy()
    df.loc[row, col] = value
    return df


def _psm_cases():
    df = _frame(PSM)
    last = len(df) + 2  # the appended row, 1-based after the header
    conflicting = _edit(df, 5, "option", "7")
    conflicting.loc[5, "q"] = conflicting.loc[5, "options"][30:35]
    return [
        ("duplicated round", pd.concat([df, df.iloc[[5]]]), rf"row {last} .*round \d+ of model .* appears twice \(first at row 7\)"),
        ("conflicting round", pd.concat([df, conflicting.iloc[[5]]]), rf"row {last} .*appears twice"),
        ("round 999", _edit(df, 7, "round", "999"), r"row 9 .*round must be an integer in 0..160, got '999'"),
        ("price_index 99", _edit(df, 7, "price_index", "99"), r"row 9 .*price_index must be an integer in 0..4, got '99'"),
        ("NaN option", _edit(df, 7, "option", "NaN"), r"row 9 .*option must be an integer in 1..100 or empty, got 'NaN'"),
        ("NaN round", _edit(df, 7, "round", "NaN"), r"row 9 .*round must be an integer"),
        ("bad corner", _edit(df, 7, "corner", "55555"), r"row 9 .*corner 55555 is neither corner"),
        ("q not the option", _edit(df, 7, "q", "00000"), r"row 9 .*is not option"),
        ("header only", df.iloc[:0], r"has a header but no rows"),
    ]


@pytest.mark.parametrize("name,frame,match", _psm_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_read_psm_rejects_bad_rows(tmp_path, name, frame, match):
    f = tmp_path / "bad.csv.gz"
    frame.to_csv(f, index=False, compression="gzip")
    with pytest.raises(ValueError, match=match) as e:
        read_psm(f)
    assert str(f) in str(e.value) and "fix:" in str(e.value)


@pytest.mark.parametrize("reader,good", [(read_psm, PSM), (read_responses, MC)])
@pytest.mark.parametrize("kind,match", [("empty", "is empty"), ("not gzip", "cannot be read"),
                                        ("truncated", "cannot be read")])
def test_readers_reject_unreadable_files(tmp_path, reader, good, kind, match):
    f = tmp_path / "bad.csv.gz"
    raw = good.read_bytes()
    f.write_bytes({"empty": b"", "not gzip": gzip.decompress(raw)[:300], "truncated": raw[: len(raw) // 2]}[kind])
    with pytest.raises(ValueError, match=match) as e:
        reader(f)
    assert str(f) in str(e.value) and "fix:" in str(e.value)


def _mc_cases():
    df = _frame(MC)
    last = len(df) + 2  # the appended row: after the header and every committed row (1-based lines)
    return [
        ("duplicated answer", pd.concat([df, df.iloc[[3]]]), rf"row {last} .*appears twice \(the same answer, first at row 5\)"),
        ("conflicting answer", pd.concat([df, _edit(df, 3, "answer_raw", "zzz").iloc[[3]]]), rf"row {last} .*conflicting answers"),
        ("NaN sample", _edit(df, 7, "eval_sample_nb", "NaN"), r"row 9 .*eval_sample_nb must be an integer >= 0, got 'NaN'"),
        ("ordering 2", _edit(df, 7, "question_ordering", "2"), r"row 9 .*question_ordering must be 0 or 1"),
        ("bad decision", _edit(df, 7, "decision", "maybe"), r"row 9 .*decision must be one of"),
        ("header only", df.iloc[:0], r"has a header but no rows"),
    ]


@pytest.mark.parametrize("name,frame,match", _mc_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_moralchoice_reader_rejects_bad_rows(tmp_path, name, frame, match):
    f = tmp_path / "bad.csv.gz"
    frame.to_csv(f, index=False, compression="gzip")
    with pytest.raises(ValueError, match=match) as e:
        read_responses(f)
    assert str(f) in str(e.value) and "fix:" in str(e.value)


def test_committed_data_passes():
    assert {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"} <= set(read_psm(data_dir() / "psm"))
    assert len(read_responses(data_dir() / "moralchoice")) >= 4 * 1200


def test_run_all_checks_the_data_before_running_notebooks(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import ROOT, write_tiny_notebooks

    write_tiny_notebooks(tmp_path / "nb", ["01"])
    (tmp_path / "data" / "psm").mkdir(parents=True)
    df = _frame(PSM)
    bad = tmp_path / "data" / "psm" / "x.csv.gz"
    pd.concat([df, df.iloc[[5]]]).to_csv(bad, index=False, compression="gzip")
    env = dict(os.environ, MORALKIT_DATA_DIR=str(tmp_path / "data"))
    p = subprocess.run([sys.executable, str(ROOT / "run_all.py"), "--notebooks", str(tmp_path / "nb"),
                        "--out", str(tmp_path / "b")], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 2, p.stderr
    assert "bad data, no notebook was run" in p.stderr and str(bad) in p.stderr and "row 163" in p.stderr
    assert not (tmp_path / "b" / "index.html").exists()
