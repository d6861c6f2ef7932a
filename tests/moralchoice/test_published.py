"""The loader of the original study's published responses, tested offline on a made-up fixture in the
same layout (tests/data/moralchoice_published; not answers of any model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moralkit import moralchoice as mc
from moralkit.moralchoice import published as pub

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "moralchoice_published"


def _fetch_counting(calls):
    def fetch(url):
        calls.append(url)
        p = Path(url.removeprefix("file://"))
        if not p.exists():
            raise FileNotFoundError(url)
        return p.read_bytes()
    return fetch


def test_absent_cache_loads_empty(tmp_path):
    assert pub.published_files("low", cache_dir=tmp_path) == []
    assert pub.load_published("high", cache_dir=tmp_path).empty


def test_download_once_cache_verify_and_load(tmp_path):
    calls = []
    kw = dict(cache_dir=tmp_path, base_url=f"file://{FIXTURE}", fetch=_fetch_counting(calls))
    st = pub.download_published(["openai_gpt-4", "no_such-model"], **kw)
    assert list(st["status"].str.split(":").str[0]) == ["downloaded", "failed", "downloaded", "failed"]
    assert len(calls) == 4
    st2 = pub.download_published(["openai_gpt-4"], **kw)  # cached: nothing fetched again
    assert list(st2["status"]) == ["cached", "cached"] and len(calls) == 4
    assert list(st2["sha256"]) == list(st["sha256"].dropna())
    low = pub.load_published("low", cache_dir=tmp_path)
    assert set(low["model"]) == {"fixture/made-up-answers"} and (low["origin"] == "paper").all()
    assert len(low) == 24 and low["scenario_id"].nunique() == 2
    assert (low["decision"] == low["stored_decision"]).all()  # the project's mapping gives the files' decisions
    m = mc.scenario_metrics(low)
    assert len(m) == 2 and (m["n_forms"] == 6).all()
    assert '"low/results_openai_gpt-4.csv": "' in pub.published_checksums(tmp_path)


def test_changed_file_is_detected(tmp_path):
    pub.download_published(["openai_gpt-4"], ("low",), cache_dir=tmp_path, base_url=f"file://{FIXTURE}",
                           fetch=_fetch_counting([]))
    f = pub.published_files("low", cache_dir=tmp_path)[0]
    f.write_text(f.read_text().replace(",A,A,", ",B,B,", 1))
    with pytest.raises(ValueError, match="sha256"):
        pub.load_published("low", cache_dir=tmp_path)
    stray = f.parent / "results_stray.csv"
    stray.write_text("x")
    with pytest.raises(ValueError, match="sha256"):
        pub.published_files("low", cache_dir=tmp_path)


def test_pinned_hash_wins(tmp_path, monkeypatch):
    monkeypatch.setitem(pub.PINNED_SHA256, "high/results_openai_gpt-4.csv", "0" * 64)
    with pytest.raises(ValueError, match="pinned"):
        pub.download_published(["openai_gpt-4"], ("high",), cache_dir=tmp_path, base_url=f"file://{FIXTURE}",
                               fetch=_fetch_counting([]))


def test_names_and_urls():
    assert len(pub.PUBLISHED_MODELS) == 28 == len(set(pub.PUBLISHED_MODELS))
    u = pub.published_url("high", "openai_gpt-4")
    assert pub.PUBLISHED_COMMIT in u and u.startswith("https://raw.githubusercontent.com/ninodimontalcino/")
    with pytest.raises(ValueError, match="ambiguity"):
        pub.published_url("controversial", "openai_gpt-4")
