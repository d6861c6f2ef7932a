"""Where, when and with what a run was collected: time stamps, derived seeds, prompt hashes, package
versions, the git commit, the session's command line and the model's provider.

These are the provenance fields of the run manifest and of every record
(:class:`moralkit.collect.store.RecordStore`); they are also importable from :mod:`moralkit.collect.store`.

References
----------
Scherrer et al. (2023), Section 3.3 (query timestamps recorded for provenance).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["utc_now", "prompt_sha256", "derive_seed", "package_versions", "git_commit", "session_info",
           "provider_of"]


def utc_now() -> str:
    """Current UTC time, ISO 8601 with milliseconds and ``Z``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def prompt_sha256(messages) -> str:
    """sha256 of the chat messages (canonical JSON), to check prompts across runs."""
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def derive_seed(seed: int, *keys) -> int:
    """A 31-bit seed derived from a run seed and task keys (stable across processes and resumes)."""
    h = hashlib.sha256(":".join([str(int(seed))] + [str(k) for k in keys]).encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def package_versions(names=("moralkit", "numpy", "pandas", "torch", "transformers", "gguf", "accelerate",
                            "openai")) -> dict:
    """Installed versions of the packages that matter for collection (``None`` when absent)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def git_commit(path=None) -> str | None:
    """The git commit of the source checkout (with ``-dirty``), or ``None``."""
    cwd = Path(path) if path else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        if not sha:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "moralkit"],
                               cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def session_info(argv=None) -> dict:
    """Provenance of one collection session (time, host, command line, pid)."""
    return {"started": utc_now(), "host": socket.gethostname(), "pid": os.getpid(),
            "argv": _portable_argv(sys.argv if argv is None else argv), "platform": platform.platform()}


def _portable_argv(argv) -> list:
    """The command line without machine paths (``.../moralkit/__main__.py`` becomes ``python -m moralkit``)
    and without credentials in URLs."""
    from .secrets import strip_url

    argv = [strip_url(a) if isinstance(a, str) and "://" in a else a for a in argv]
    if argv and str(argv[0]).endswith("__main__.py"):
        return ["python", "-m", "moralkit"] + argv[1:]
    if argv:
        argv[0] = os.path.basename(str(argv[0]))
    return argv


def provider_of(manifest: dict) -> str:
    """The organisation that publishes a run's model (the ``provider`` column of both exports).

    The manifest's ``provider`` when it names one; else the organisation of the upstream hub id in
    ``backend_info`` (``"Qwen/Qwen2.5-Coder-0.5B-Instruct"`` gives ``"Qwen"``); else ``""``.
    Manifests written before the backend had its own column hold the backend kind under
    ``provider``; that value is not a provider and is skipped.

    Examples
    --------
    >>> provider_of({"backend": "transformers", "provider": "transformers",
    ...              "backend_info": {"upstream": "Qwen/Qwen2.5-Coder-0.5B-Instruct"}})
    'Qwen'
    >>> provider_of({"backend": "openai", "provider": "OpenAI"})
    'OpenAI'
    >>> provider_of({"backend": "openai"})
    ''
    """
    given = manifest.get("provider") or ""
    if given and given != manifest.get("backend"):
        return given
    upstream = (manifest.get("backend_info") or {}).get("upstream") or ""
    return upstream.split("/")[0] if "/" in upstream else ""
