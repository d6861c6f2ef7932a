"""The PSM's numba kernels, compiled once and shipped with the package, so a fresh clone need not compile them.

Every ``@njit(cache=True)`` kernel of :mod:`moralkit.psm` (the ``moralkit/psm/_*_kernels.py`` modules) is
compiled the first time a process calls it, and numba writes the machine code to its cache: an index
``<kernel>-<line>.pyXY.nbi`` and data files ``<kernel>-<line>.pyXY.<n>.nbc`` in
``moralkit/psm/__pycache__`` (or under ``NUMBA_CACHE_DIR``). A fresh clone has no such cache, so its first
run of README command 1 compiled the kernels, in each notebook that needed them (about 50 processor
seconds, issue 30).

The package therefore ships that cache: ``moralkit/psm/compiled/`` holds the index and data files that
:func:`build` wrote, and each kernel module calls :func:`install` when it is imported, which copies a
kernel's files into numba's cache folder when that folder holds no usable index for it. Numba itself then
decides whether to use them, with its own checks, exactly as for a cache it wrote:

- the index must carry the running numba's version;
- its stamp must be the SHA-256 of the kernel module's source as it is now (numba 0.68 stamps an index
  with the source's content, numba pull request 10659; older numba used the file's modification time,
  which a checkout changes, so with it the shipped index is never used);
- an entry is used only for the same signature, the same bytecode, and the same target: the machine
  triple, CPU name and CPU features (``magic_tuple``) that compiled it.

Where any of these differ (another numba, an edited kernel, another CPU), numba compiles the kernel as it
always did and writes its own cache; nothing else changes. The code numba loads is the code it would have
compiled for this machine, so results are the same either way. :data:`MANIFEST` records what built the
shipped cache; ``tests/psm/test_kernel_cache.py`` fails when a kernel's source no longer matches it.

Set ``MORALKIT_KERNEL_CACHE=0`` to skip the install (``benchmarks/bench_numba_compile.py`` does, to measure
compilation). Rebuild after editing a kernel module::

    .venv/bin/python -m moralkit.psm.kernel_cache build

References
----------
Numba documentation, "Notes on caching" (cache invalidation: source stamp, signature, CPU target):
https://numba.readthedocs.io/en/stable/developer/caching.html. Numba pull request 10659, "Make .nbi files
reproducible" (the content stamp): https://github.com/numba/numba/pull/10659
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["BUNDLE", "MANIFEST", "build", "install", "kernel_modules", "status"]

#: The folder of the shipped cache (index and data files, and ``manifest.json``).
BUNDLE = Path(__file__).resolve().parent / "compiled"
#: What built the shipped cache: numba, Python, the target, and each kernel module's source SHA-256.
MANIFEST = BUNDLE / "manifest.json"

_ENV = "MORALKIT_KERNEL_CACHE"


def kernel_modules() -> list[Path]:
    """The kernel modules' source files (``moralkit/psm/_*_kernels.py``), sorted by name."""
    return sorted(Path(__file__).resolve().parent.glob("_*_kernels.py"))


def _read_index(path: Path):
    """``(version, stamp, overloads)`` of a numba index file, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
    except Exception:  # missing, truncated, or written by another numba: numba would not use it either
        return None
    return version, stamp, overloads


def _copy(src: Path, dst: Path) -> None:
    """Copy one file atomically (a reader sees the old file or the whole new one)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(namespace: dict) -> int:
    """Copy the shipped cache of the kernels in ``namespace`` (a kernel module's globals) into numba's cache.

    Called at the end of each kernel module. A kernel's files are copied when numba's cache folder has no
    index for it that numba would use (none, another numba's, or a stale one), and the shipped index is
    one it would use: written by this numba, and stamped with the module's source as it is now. Entries
    for another CPU are copied too and simply not found by numba, which then compiles.

    Parameters
    ----------
    namespace : dict
        The module's ``globals()``; its numba dispatchers are the kernels.

    Returns
    -------
    int
        How many kernels' files were copied (0 when ``MORALKIT_KERNEL_CACHE=0``, or when nothing applied).
    """
    if os.environ.get(_ENV, "1") == "0" or not BUNDLE.is_dir():
        return 0
    try:
        import numba
        from numba.core.registry import CPUDispatcher
    except ImportError:  # pragma: no cover - the kernel modules import numba first
        return 0
    copied = 0
    for obj in list(namespace.values()):
        if not isinstance(obj, CPUDispatcher):
            continue
        # numba's per-function cache: its folder, index path and the source stamp it expects (private
        # attributes of numba.core.caching; if they change, nothing is installed and numba compiles)
        cache_file = getattr(getattr(obj, "_cache", None), "_cache_file", None)
        index = Path(getattr(cache_file, "_index_path", "") or "")
        stamp = getattr(cache_file, "_source_stamp", None)
        if cache_file is None or not index.name or stamp is None:
            continue
        shipped = BUNDLE / index.name
        if not shipped.is_file():
            continue
        try:
            if index.read_bytes() == shipped.read_bytes():
                continue  # installed already (the usual case after a first run): no need to unpickle
        except OSError:
            pass
        local = _read_index(index)
        if local is not None and local[0] == numba.__version__ and local[1] == stamp:
            continue  # numba's own cache for this kernel is usable: keep it (it may hold more signatures)
        ours = _read_index(shipped)
        if ours is None or ours[0] != numba.__version__ or ours[1] != stamp:
            continue  # the shipped index is for another numba or another source: numba compiles
        try:
            index.parent.mkdir(parents=True, exist_ok=True)
            for name in sorted(set(ours[2].values())):
                _copy(BUNDLE / name, index.parent / name)
            _copy(shipped, index)  # the index last: it never names a data file not yet in place
        except OSError:  # a read-only cache folder: numba falls back to compiling, as without a bundle
            continue
        copied += 1
    return copied


def _magic_tuple() -> tuple:
    from numba.core.registry import cpu_target

    return tuple(cpu_target.target_context.codegen().magic_tuple())


def _source_hashes() -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kernel_modules()}


def status() -> dict:
    """Whether the shipped cache can serve this machine, and why not when it cannot.

    Returns
    -------
    dict
        ``usable`` (bool) and ``reasons`` (list of str: each difference between what built the shipped
        cache and this machine: numba version, Python version, CPU target, or an edited kernel module).
    """
    import numba

    if not MANIFEST.is_file():
        return {"usable": False, "reasons": [f"no shipped cache ({MANIFEST} is missing)"]}
    m = json.loads(MANIFEST.read_text(encoding="utf-8"))
    reasons = []
    if m["numba"] != numba.__version__:
        reasons.append(f"built by numba {m['numba']}, this is numba {numba.__version__}")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if m["python"] != py:
        reasons.append(f"built for Python {m['python']}, this is Python {py}")
    target = _magic_tuple()
    if tuple(m["target"]) != target:
        reasons.append(f"built for CPU {m['target'][1]}, this machine's target is {target[1]} "
                       "(or has other CPU features)")
    now = _source_hashes()
    for name in sorted(set(now) | set(m["sources"])):
        if now.get(name) != m["sources"].get(name):
            reasons.append(f"{name} has changed since the cache was built: run "
                           "`python -m moralkit.psm.kernel_cache build`")
    return {"usable": not reasons, "reasons": reasons}


def build(hm: bool = True) -> dict:
    """Compile every kernel the notebooks and the Houtman–Maks solver use, and write the shipped cache.

    Runs :func:`moralkit.psm.warmup.warm_kernels` in a new process with an empty ``NUMBA_CACHE_DIR`` (and
    ``MORALKIT_KERNEL_CACHE=0``), then replaces the contents of :data:`BUNDLE` with the index and data
    files it wrote, and writes :data:`MANIFEST`.

    Parameters
    ----------
    hm : bool, default True
        Include the Houtman–Maks kernels (used by the tests and ``moralkit.psm.houtman_maks``).

    Returns
    -------
    dict
        The manifest written.
    """
    import platform
    import subprocess

    import numba

    # The machine code's metadata names the source files and NumPy's, by absolute path. Compile through a
    # fixed neutral path (symlinks to the interpreter's environment and to this source tree) so that the
    # shipped files name neither the builder's home nor its checkout, and so that two builds are alike.
    neutral = Path(tempfile.gettempdir()) / "moralkit-kernel-build"
    if neutral.is_symlink() or neutral.is_file():
        neutral.unlink()
    elif neutral.exists():
        shutil.rmtree(neutral)
    neutral.mkdir()
    (neutral / "env").symlink_to(sys.prefix, target_is_directory=True)
    (neutral / "src").symlink_to(Path(__file__).resolve().parents[2], target_is_directory=True)
    python = neutral / "env" / Path(sys.executable).relative_to(sys.prefix) \
        if Path(sys.executable).is_relative_to(sys.prefix) else Path(sys.executable)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp, _ENV: "0", "PYTHONPATH": str(neutral / "src")}
        code = f"from moralkit.psm.warmup import warm_kernels; warm_kernels(hm={bool(hm)})"
        try:
            subprocess.run([str(python), "-c", code], env=env, check=True, cwd=neutral)
        finally:
            shutil.rmtree(neutral)
        files = sorted(p for p in Path(tmp).rglob("*") if p.suffix in (".nbi", ".nbc"))
        if not files:
            from ..errors import MoralkitError

            raise MoralkitError("the warm-up wrote no numba cache files; is numba's caching disabled "
                                "(NUMBA_DISABLE_JIT or NUMBA_CACHE_DIR unwritable)?")
        if BUNDLE.is_dir():
            shutil.rmtree(BUNDLE)
        BUNDLE.mkdir()
        for p in files:
            shutil.copyfile(p, BUNDLE / p.name)
    manifest = {"numba": numba.__version__, "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
                "platform": platform.platform(terse=True), "target": list(_magic_tuple()),
                "sources": _source_hashes(), "files": len(files),
                "bytes": sum((BUNDLE / p.name).stat().st_size for p in files)}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["build"]:
        m = build()
        print(f"wrote {m['files']} files ({m['bytes'] / 1e6:.1f} MB) to {BUNDLE} for {m['target'][1]}")
    elif sys.argv[1:] in ([], ["status"]):
        s = status()
        print("usable" if s["usable"] else "not usable here: " + "; ".join(s["reasons"]))
    else:
        raise SystemExit("usage: python -m moralkit.psm.kernel_cache [status|build]")
