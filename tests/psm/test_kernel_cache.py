"""The shipped compiled cache of the PSM kernels (moralkit.psm.kernel_cache, issue 30).

Each test that loads kernels runs in a new process with its own empty ``NUMBA_CACHE_DIR``, so what it sees
is what a fresh clone sees, whatever this process has compiled or loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from moralkit.psm import kernel_cache

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, tmp_path: Path, **env) -> dict:
    """Run ``code`` in a new interpreter with an empty numba cache under tmp_path; return its JSON output."""
    cache = tmp_path / "numba"
    cache.mkdir(parents=True, exist_ok=True)
    full = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **env}
    p = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


_STATS = """
import json
from moralkit.psm.warmup import dispatchers, warm_group
for g in GROUPS:
    warm_group(g)
ds = dispatchers()
print(json.dumps({
    "hits": sorted(k for k, d in ds.items() if sum(d.stats.cache_hits.values())),
    "misses": sorted(k for k, d in ds.items() if sum(d.stats.cache_misses.values())),
}))
"""


def test_the_shipped_cache_was_built_from_these_kernel_sources():
    """An edited kernel module needs a rebuild (`python -m moralkit.psm.kernel_cache build`)."""
    manifest = json.loads(kernel_cache.MANIFEST.read_text(encoding="utf-8"))
    now = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kernel_cache.kernel_modules()}
    assert len(now) == 5
    assert manifest["sources"] == now, "a kernel module changed: run `python -m moralkit.psm.kernel_cache build`"
    indexes = sorted(kernel_cache.BUNDLE.glob("*.nbi"))
    assert indexes, "the shipped cache has no index files"
    for index in indexes:
        with open(index, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
        module = index.name.split(".", 1)[0] + ".py"
        assert version == manifest["numba"]
        # numba's stamp is the module source's SHA-256: the index is usable exactly when the source is this one
        assert stamp.hex() == now[module], index.name
        for name in overloads.values():
            assert (kernel_cache.BUNDLE / name).is_file(), f"{index.name} names a missing {name}"
    assert manifest["files"] == len(list(kernel_cache.BUNDLE.glob("*.nb?")))


def test_status_names_each_difference(monkeypatch, tmp_path):
    manifest = json.loads(kernel_cache.MANIFEST.read_text(encoding="utf-8"))
    manifest["numba"] = "0.1"
    manifest["sources"]["_rp_kernels.py"] = "0" * 64
    fake = tmp_path / "manifest.json"
    fake.write_text(json.dumps(manifest), encoding="utf-8")
    monkeypatch.setattr(kernel_cache, "MANIFEST", fake)
    s = kernel_cache.status()
    assert not s["usable"]
    assert any("numba 0.1" in r for r in s["reasons"])
    assert any(r.startswith("_rp_kernels.py has changed") and "kernel_cache build" in r for r in s["reasons"])
    monkeypatch.setattr(kernel_cache, "MANIFEST", tmp_path / "absent.json")
    assert kernel_cache.status() == {"usable": False, "reasons": [f"no shipped cache ({tmp_path / 'absent.json'} "
                                                                  "is missing)"]}


@pytest.fixture(scope="module")
def usable():
    s = kernel_cache.status()
    if not s["usable"]:
        pytest.skip("the shipped cache cannot serve this machine: " + "; ".join(s["reasons"]))
    return s


def test_a_fresh_cache_loads_every_notebook_kernel_without_compiling(usable, tmp_path):
    r = _run("from moralkit.psm.warmup import GROUPS\n" + _STATS, tmp_path)
    assert r["misses"] == []
    # the kernels the notebooks call (warmup.GROUPS) are all found in the installed cache
    assert len(r["hits"]) >= 14, r["hits"]
    assert "_rp_kernels.psm_levels_batch" in r["hits"] and "_partition_kernels.max_subsets" in r["hits"]


def test_without_the_shipped_cache_numba_compiles_and_the_answers_are_the_same(usable, tmp_path):
    code = """
import json
import numpy as np
from moralkit.psm import rp
from moralkit.psm.rationality import random_choice_tests
from moralkit.psm.warmup import _data, dispatchers
a, b = _data()
out = [str(rp.ccei_exact(rp.psm_expenditure_matrix(d))) for d in (a, b)]
t = random_choice_tests([a, b], n_datasets=20, seed=3)
ds = dispatchers()
print(json.dumps({"ccei": out, "table": t.to_csv() if hasattr(t, "to_csv") else repr(t),
                  "misses": sorted(k for k, d in ds.items() if sum(d.stats.cache_misses.values())),
                  "hits": sorted(k for k, d in ds.items() if sum(d.stats.cache_hits.values()))}))
"""
    shipped = _run(code, tmp_path / "shipped")
    compiled = _run(code, tmp_path / "compiled", MORALKIT_KERNEL_CACHE="0")
    assert shipped["misses"] == [] and shipped["hits"]
    assert compiled["hits"] == [] and compiled["misses"], "MORALKIT_KERNEL_CACHE=0 should make numba compile"
    assert set(shipped["hits"]) <= set(compiled["misses"])  # compiling also compiles the callees
    assert shipped["ccei"] == compiled["ccei"] and shipped["table"] == compiled["table"]


def test_install_keeps_a_usable_local_index_and_replaces_an_unusable_one(usable, tmp_path):
    code = """
import json
from pathlib import Path
from moralkit.psm import _rp_kernels as k
from moralkit.psm.kernel_cache import install
index = Path(k.psm_levels_batch._cache._cache_file._index_path)
installed_at_import = index.is_file()
again = install(vars(k))  # every index is usable now: nothing to copy
index.write_bytes(b"not an index")
replaced = install(vars(k))
print(json.dumps({"at_import": installed_at_import, "again": again, "replaced": replaced,
                  "restored": index.read_bytes() == (Path(k.__file__).parent / "compiled" / index.name).read_bytes()}))
"""
    r = _run(code, tmp_path)
    assert r == {"at_import": True, "again": 0, "replaced": 1, "restored": True}


def test_moralkit_kernel_cache_0_installs_nothing(tmp_path):
    r = _run("import json, os\nfrom moralkit.psm import _rp_kernels\n"
             "print(json.dumps(sorted(str(p) for p in __import__('pathlib').Path(os.environ['NUMBA_CACHE_DIR'])"
             ".rglob('*.nb?'))))", tmp_path, MORALKIT_KERNEL_CACHE="0")
    assert r == []


def test_an_index_from_another_numba_is_not_installed(tmp_path, monkeypatch):
    """install() copies only indexes this numba would use: here the shipped one claims another version."""
    from moralkit.psm import _rp_kernels as k

    bundle = tmp_path / "compiled"
    bundle.mkdir()
    d = k.psm_levels_batch
    index = Path(d._cache._cache_file._index_path)
    with open(kernel_cache.BUNDLE / index.name, "rb") as f:
        pickle.load(f)
        rest = f.read()
    with open(bundle / index.name, "wb") as f:
        pickle.dump("0.1", f)
        f.write(rest)
    cache = tmp_path / "cache"
    monkeypatch.setattr(kernel_cache, "BUNDLE", bundle)
    monkeypatch.setattr(d._cache._cache_file, "_index_path", str(cache / index.name))
    assert kernel_cache.install({"psm_levels_batch": d}) == 0
    assert not cache.exists()
