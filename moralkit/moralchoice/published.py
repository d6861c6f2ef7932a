"""The original study's published responses of 28 LLMs: download once, cache, verify, load.

Scherrer et al. released the answers behind their Figures 3-5 in their
repository ``ninodimontalcino/moralchoice`` (MIT licence), one file per model
and ambiguity level::

    data/responses/paper/{low,high}/results_<provider>_<model>.csv

This module fetches them **at a pinned commit** (:data:`PUBLISHED_COMMIT`), once,
into a cache directory, and checks every file's sha256:

* against :data:`PINNED_SHA256` when the file's hash is pinned there;
* otherwise against the hash recorded in the cache's ``SHA256SUMS`` the first
  time the file was downloaded (trust on first use), so that a file that
  changes on disk afterwards is detected. ``published_checksums()`` prints the
  lines to pin.

No file is part of this repository and nothing is downloaded unless asked
(:func:`download_published`); :func:`load_published` reads what the cache holds
and returns an empty table when it holds nothing, so notebooks can say that the
data are absent. The model names follow the repository's ``<provider>_<model>``
rule; the list (:data:`PUBLISHED_MODELS`) is the 28 models of the paper's Table 14.
A name the repository does not hold is reported by :func:`download_published`
and skipped.

The cache is ``$MORALKIT_PUBLISHED_DIR`` or ``~/.cache/moralkit/moralchoice-paper``,
with one sub-directory per commit.

References
----------
Scherrer et al. (2023), Section 3.3 (M = 5 samples per form for low-, M = 10 for
high-ambiguity scenarios), Section 4 (Figures 3-5), Appendix C (Table 14: the 28 models).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd

from ..checks import check_choice
from ..errors import DataError

__all__ = ["PUBLISHED_REPO", "PUBLISHED_COMMIT", "PUBLISHED_MODELS", "PINNED_SHA256", "published_url",
           "published_cache_dir", "download_published", "published_files", "load_published",
           "published_checksums"]

PUBLISHED_REPO = "ninodimontalcino/moralchoice"
#: The commit whose ``data/responses/paper`` files are used.
PUBLISHED_COMMIT = "9f1dbced7ecf70e334af9a88c3d93be5af0f37b8"
_RAW = "https://raw.githubusercontent.com/{repo}/{commit}/data/responses/paper/{ambiguity}/results_{model}.csv"

#: The 28 models of the paper (Table 14), as ``<provider>_<model>`` file names.
PUBLISHED_MODELS: tuple[str, ...] = (
    "ai21_j2-grande-instruct", "ai21_j2-jumbo-instruct",
    "anthropic_claude-instant-v1.0", "anthropic_claude-instant-v1.1", "anthropic_claude-v1.3",
    "bigscience_bloomz-560m", "bigscience_bloomz-1b1", "bigscience_bloomz-1b7", "bigscience_bloomz-3b",
    "bigscience_bloomz-7b1", "bigscience_bloomz-7b1-mt",
    "cohere_command-medium", "cohere_command-xlarge",
    "google_flan-t5-small", "google_flan-t5-base", "google_flan-t5-large", "google_flan-t5-xl",
    "google_text-bison-001",
    "meta_opt-iml-regular-small", "meta_opt-iml-max-small",
    "openai_text-ada-001", "openai_text-babbage-001", "openai_text-curie-001", "openai_text-davinci-001",
    "openai_text-davinci-002", "openai_text-davinci-003", "openai_gpt-3.5-turbo", "openai_gpt-4",
)

#: sha256 of published files, ``"<ambiguity>/results_<model>.csv" -> hex``, filled in by someone who has
#: downloaded them (``published_checksums()``); empty files are checked against the cache's own record.
PINNED_SHA256: dict[str, str] = {}

_SUMS = "SHA256SUMS"


def published_url(ambiguity: str, model: str, commit: str = PUBLISHED_COMMIT, base_url: str | None = None) -> str:
    """The download address of one published file (``base_url`` replaces GitHub, e.g. a mirror or ``file://``).

    Examples
    --------
    >>> published_url("low", "openai_gpt-4").endswith("/data/responses/paper/low/results_openai_gpt-4.csv")
    True
    """
    _check_ambiguity(ambiguity)
    if base_url is not None:
        return f"{base_url.rstrip('/')}/{ambiguity}/results_{model}.csv"
    return _RAW.format(repo=PUBLISHED_REPO, commit=commit, ambiguity=ambiguity, model=model)


def _check_ambiguity(ambiguity):
    check_choice(ambiguity, ("low", "high"), "ambiguity (the paper's two tables)")


def published_cache_dir(cache_dir=None, commit: str = PUBLISHED_COMMIT) -> Path:
    """The cache directory of one commit (``$MORALKIT_PUBLISHED_DIR`` or ``~/.cache/moralkit/moralchoice-paper``)."""
    root = Path(cache_dir or os.environ.get("MORALKIT_PUBLISHED_DIR")
                or Path.home() / ".cache" / "moralkit" / "moralchoice-paper")
    return root / commit


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def _read_sums(d: Path) -> dict:
    p = d / _SUMS
    if not p.exists():
        return {}
    out = {}
    for line in p.read_text().splitlines():
        if line.strip():
            h, name = line.split(maxsplit=1)
            out[name.strip()] = h
    return out


def _write_sums(d: Path, sums: dict) -> None:
    tmp = d / f"{_SUMS}.tmp{os.getpid()}"
    tmp.write_text("".join(f"{h}  {n}\n" for n, h in sorted(sums.items())))
    os.replace(tmp, d / _SUMS)


def _fetch_url(url: str, timeout: float = 120.0) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - fixed https / user-given base_url
        return r.read()


def download_published(models=None, ambiguities=("low", "high"), *, cache_dir=None, commit: str = PUBLISHED_COMMIT,
                       base_url: str | None = None, fetch=None) -> pd.DataFrame:
    """Download the published response files that the cache does not hold yet, and verify them all.

    Parameters
    ----------
    models : list of str, optional
        ``<provider>_<model>`` names (default :data:`PUBLISHED_MODELS`).
    ambiguities : tuple of {"low", "high"}
    cache_dir : path-like, optional
        Root of the cache (see :func:`published_cache_dir`).
    commit : str
        The pinned commit (default :data:`PUBLISHED_COMMIT`).
    base_url : str, optional
        Fetch ``<base_url>/<ambiguity>/results_<model>.csv`` instead of GitHub.
    fetch : callable, optional
        ``fetch(url) -> bytes`` (default: :mod:`urllib`); raise to signal a missing file.

    Returns
    -------
    DataFrame
        One row per file: ``ambiguity``, ``model``, ``status`` (``cached``,
        ``downloaded`` or ``failed: <reason>``), ``sha256``, ``bytes``.

    Raises
    ------
    ValueError
        A file whose sha256 differs from the pinned or first recorded one (delete
        it from the cache to download it again).
    """
    models = list(PUBLISHED_MODELS if models is None else models)
    fetch = fetch or _fetch_url
    d = published_cache_dir(cache_dir, commit)
    sums = _read_sums(d)
    rows = []
    for amb in ambiguities:
        _check_ambiguity(amb)
        (d / amb).mkdir(parents=True, exist_ok=True)
        for m in models:
            name = f"{amb}/results_{m}.csv"
            path = d / name
            status = "cached"
            if not path.exists():
                try:
                    data = fetch(published_url(amb, m, commit, base_url))
                except Exception as exc:  # a missing model or no network: reported, not fatal
                    rows.append(dict(ambiguity=amb, model=m, status=f"failed: {type(exc).__name__}: {exc}"[:200],
                                     sha256=None, bytes=0))
                    continue
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(data)
                os.replace(tmp, path)
                status = "downloaded"
            h = _sha256(path)
            _verify(name, h, sums, path)
            sums.setdefault(name, h)
            rows.append(dict(ambiguity=amb, model=m, status=status, sha256=h, bytes=path.stat().st_size))
    if sums:
        _write_sums(d, sums)
    return pd.DataFrame(rows, columns=["ambiguity", "model", "status", "sha256", "bytes"])


def _verify(name, h, sums, path):
    want = PINNED_SHA256.get(name) or sums.get(name)
    if want is not None and want != h:
        raise DataError(f"{path} has sha256 {h}, expected {want} (pinned for {PUBLISHED_REPO}@{PUBLISHED_COMMIT[:8]}"
                         f"{'' if name in PINNED_SHA256 else ' when first downloaded'}); delete the file and "
                         "download it again with download_published().")


def published_files(ambiguity: str, *, cache_dir=None, commit: str = PUBLISHED_COMMIT, verify: bool = True) -> list:
    """The cached published files of one ambiguity level (sha256-checked), in name order; [] when none."""
    _check_ambiguity(ambiguity)
    d = published_cache_dir(cache_dir, commit)
    files = sorted((d / ambiguity).glob("results_*.csv")) if (d / ambiguity).is_dir() else []
    if verify and files:
        sums = _read_sums(d)
        for f in files:
            name = f"{ambiguity}/{f.name}"
            if name not in sums and name not in PINNED_SHA256:
                raise DataError(f"{f} has no recorded sha256 (it was not written by download_published()); "
                                 "delete it and run download_published().")
            _verify(name, _sha256(f), sums, f)
    return files


def load_published(ambiguity: str, *, cache_dir=None, commit: str = PUBLISHED_COMMIT, source=None) -> pd.DataFrame:
    """The cached published responses of one ambiguity level, mapped to actions (empty when not downloaded).

    Parameters
    ----------
    ambiguity : {"low", "high"}
    cache_dir, commit
        See :func:`download_published`.
    source : optional
        MoralChoice survey source (:func:`moralkit.moralchoice.survey_source`).

    Returns
    -------
    DataFrame
        Tidy mapped responses as :func:`moralkit.moralchoice.load_responses`
        returns them (``model`` is the files' ``model_id``), with ``origin`` =
        ``"paper"``; empty (with the columns) when the cache holds no file.
    """
    from .responses import TIDY_COLUMNS, load_responses

    files = published_files(ambiguity, cache_dir=cache_dir, commit=commit)
    if not files:
        return pd.DataFrame(columns=list(TIDY_COLUMNS) + ["decision", "origin"])
    df = load_responses(ambiguity, source, own_data=files, include_shared=False)
    return df.assign(origin="paper")


def published_checksums(cache_dir=None, commit: str = PUBLISHED_COMMIT) -> str:
    """The ``PINNED_SHA256`` entries of the cached files, as Python source lines to paste into this module."""
    sums = _read_sums(published_cache_dir(cache_dir, commit))
    return "\n".join(f'    "{n}": "{h}",' for n, h in sorted(sums.items()))
