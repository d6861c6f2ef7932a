"""PSM datasets: one model's answers to the 161 rounds, in memory and on disk.

A :class:`PSMDataset` holds, for every constrained round, the effective corner,
the prices, the 100 alternatives shown and the option chosen (0 when the round
is missing). It is what every analysis in :mod:`moralkit` takes.

On disk a collection of datasets is one tidy gzip CSV (``*.csv.gz``), one row
per (model, round), written by :func:`write_psm` and read by :func:`read_psm`:

==============  ================================================================
column          meaning
==============  ================================================================
model           the respondent's label (unique within a file); MoralChoice files carry the same label
                in ``model_id``, so the two surveys pair by equality
backend         how the model was queried: ``transformers``, ``openai``, ``simulated``
provider        the organisation that publishes the model (e.g. ``Qwen``), ``""`` when unknown
run             run identifier (links to the raw records and manifest)
round           0 (unconstrained) or 1..160
corner_index    nominal corner, index into :data:`moralkit.psm.design.CORNERS`
price_index     index into :data:`moralkit.psm.design.PRICES`
corner          effective corner after the flip rule, e.g. ``"05005"``
options         the 100 alternatives as raw answers: 500 digits, 5 per option
option          chosen option number 1..100, empty when missing
q               chosen answer as 5 digits (round 0: the unconstrained answer)
attempts        number of requests made for the round
==============  ================================================================

References
----------
Seror (2025), Section 2.2 (notation: rounds, corners, choice sets).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomicfile import atomic_path
from ..errors import DataError
from .design import BUDGET, CORNERS, PRICES

__all__ = ["PSMDataset", "read_psm", "load_psm", "write_psm", "validate_dataset", "model_key", "data_summary"]


@dataclass
class PSMDataset:
    """One model's PSM answers.

    Parameters
    ----------
    model : str
        Model label.
    corners : ndarray (T, 5) of int
        Effective corner of each constrained round (after the flip rule).
    prices : ndarray (T, 5) of int
        Price vector of each round.
    options : ndarray (T, n, 5) of int
        Alternatives shown (raw answers 0..5).
    chosen : ndarray (T,) of int
        Chosen option number 1..n, or 0 for a missing round.
    round_index : ndarray (T,) of int, optional
        Round numbers 1..160 (default ``1..T``).
    corner_index, price_index : ndarray (T,) of int, optional
        Nominal corner and price indices (identify a round across models).
    q0 : ndarray (5,) or None
        Unconstrained answer of round 0, if valid.
    provider : str
        The organisation that publishes the model (e.g. ``"Qwen"``; ``""`` when unknown), as
        the column "Provider" of the paper's Table 1.
    run : str
        Run identifier (links to the raw records and manifest).
    backend : str
        How the model was queried (``"transformers"``, ``"openai"``; ``"simulated"`` for
        :mod:`moralkit.psm.simulate`).
    """

    model: str
    corners: np.ndarray
    prices: np.ndarray
    options: np.ndarray
    chosen: np.ndarray
    round_index: np.ndarray | None = None
    corner_index: np.ndarray | None = None
    price_index: np.ndarray | None = None
    q0: np.ndarray | None = None
    provider: str = ""
    run: str = ""
    backend: str = ""
    attempts: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        self.corners = np.asarray(self.corners, dtype=np.int64)
        self.prices = np.asarray(self.prices, dtype=np.int64)
        self.options = np.asarray(self.options, dtype=np.int64)
        self.chosen = np.asarray(self.chosen, dtype=np.int64)
        T = len(self.chosen)
        if self.round_index is None:
            self.round_index = np.arange(1, T + 1)
        self.round_index = np.asarray(self.round_index, dtype=np.int64)
        for name in ("corner_index", "price_index", "attempts"):
            v = getattr(self, name)
            if v is not None:
                setattr(self, name, np.asarray(v, dtype=np.int64))
        if self.q0 is not None:
            self.q0 = np.asarray(self.q0, dtype=np.int64)
        validate_dataset(self)

    # ------------------------------------------------------------------ views
    @property
    def n_rounds(self) -> int:
        """Number of constrained rounds (answered or not)."""
        return len(self.chosen)

    @property
    def answered(self) -> np.ndarray:
        """Boolean mask of rounds with a valid answer."""
        return self.chosen > 0

    @property
    def n_obs(self) -> int:
        """Number of answered constrained rounds (Table 1, "Number of Obs.")."""
        return int(self.answered.sum())

    @property
    def choices(self) -> np.ndarray:
        """Chosen answers (raw 0..5) of the answered rounds, shape (n_obs, 5)."""
        m = self.answered
        return self.options[np.nonzero(m)[0], self.chosen[m] - 1]

    def valid(self) -> "PSMDataset":
        """The dataset restricted to answered rounds."""
        return self.subset(self.answered)

    def subset(self, idx) -> "PSMDataset":
        """The dataset restricted to rounds ``idx`` (mask or integer indices)."""
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.nonzero(idx)[0]

        def take(a):
            return None if a is None else a[idx]

        return PSMDataset(
            model=self.model,
            corners=self.corners[idx],
            prices=self.prices[idx],
            options=self.options[idx],
            chosen=self.chosen[idx],
            round_index=self.round_index[idx],
            corner_index=take(self.corner_index),
            price_index=take(self.price_index),
            q0=self.q0,
            provider=self.provider,
            run=self.run,
            backend=self.backend,
            attempts=take(self.attempts),
        )

    def with_choices(self, chosen) -> "PSMDataset":
        """A copy with other chosen option numbers (e.g. a synthetic random dataset)."""
        out = self.subset(np.arange(self.n_rounds))
        out.chosen = np.asarray(chosen, dtype=np.int64)
        validate_dataset(out)
        return out


def validate_dataset(ds: PSMDataset) -> None:
    """Check shapes and the PSM constraints; raise ``ValueError`` naming the problem."""
    T = len(ds.chosen)
    if ds.corners.shape != (T, 5):
        raise DataError(f"{ds.model}: corners must have shape ({T}, 5), got {ds.corners.shape}")
    if ds.prices.shape != (T, 5):
        raise DataError(f"{ds.model}: prices must have shape ({T}, 5), got {ds.prices.shape}")
    if ds.options.ndim != 3 or ds.options.shape[0] != T or ds.options.shape[2] != 5:
        raise DataError(f"{ds.model}: options must have shape ({T}, n_options, 5), got {ds.options.shape}")
    if not np.isin(ds.corners, (0, 5)).all():
        raise DataError(f"{ds.model}: corners must have entries 0 or 5 (vertices of {{0..5}}^5)")
    if (ds.prices <= 0).any():
        raise DataError(f"{ds.model}: prices must be positive")
    if ds.options.size and (ds.options.min() < 0 or ds.options.max() > 5):
        raise DataError(f"{ds.model}: answers must be integers on the 0-5 scale")
    n_opt = ds.options.shape[1]
    if ((ds.chosen < 0) | (ds.chosen > n_opt)).any():
        raise DataError(f"{ds.model}: chosen option numbers must be 1..{n_opt} (0 = missing round)")
    if ds.q0 is not None and (ds.q0.shape != (5,) or ds.q0.min() < 0 or ds.q0.max() > 5):
        raise DataError(f"{ds.model}: q0 must be five answers on the 0-5 scale")
    if T:
        # p . |q - o| = A . q + b for answers q in 0..5 and corners o in {0, 5}^5 (both checked above)
        A = ds.prices * np.where(ds.corners == 0, 1, -1)
        b = (ds.prices * (ds.corners == 5)).sum(1) * 5
        cost = np.matmul(ds.options, A[:, :, None])[..., 0] + b[:, None]
        bad = np.argwhere(cost != BUDGET)
        if len(bad):
            t, n = bad[0]
            raise DataError(
                f"{ds.model}: option {n + 1} of round {ds.round_index[t]} is off the budget: "
                f"p . q_o = {cost[t, n]}, expected {BUDGET}; every alternative must satisfy eq. (1) "
                "in the round's corner coordinates"
            )


def model_key(model: str) -> int:
    """A 64-bit integer derived from a model label (the first 8 bytes of its SHA-256).

    Joined with the user's seed, it gives each model random numbers that depend only on
    (seed, label), not on which other models are analysed or in what order: the random-choice
    test (:mod:`moralkit.psm.rationality`) and the NLLS starts and bootstrap
    (:mod:`moralkit.psm.nlls`) use it.

    Examples
    --------
    >>> model_key("gpt-4o") == model_key("gpt-4o") != model_key("gpt-4o-mini")
    True
    """
    return int.from_bytes(hashlib.sha256(str(model).encode("utf-8")).digest()[:8], "little")


# --------------------------------------------------------------------------- files

#: Constrained rounds of the PSM: one per corner and price vector (Section 2.2).
N_ROUNDS = len(CORNERS) * len(PRICES)

_COLUMNS = ["model", "backend", "provider", "run", "round", "corner_index", "price_index", "corner",
            "options", "option", "q", "attempts"]


def _digits(a) -> str:
    return "".join(str(int(v)) for v in np.ravel(a))


def write_psm(datasets, path) -> Path:
    """Write datasets (an iterable or a dict of :class:`PSMDataset`) to a tidy ``.csv.gz``.

    The file is replaced atomically, and its bytes depend only on the data (gzip mtime 0).
    """
    if isinstance(datasets, dict):
        datasets = list(datasets.values())
    rows = []
    for ds in datasets:
        rows.append(dict(model=ds.model, backend=ds.backend, provider=ds.provider, run=ds.run, round=0,
                         corner_index="", price_index="", corner="", options="", option="",
                         q="" if ds.q0 is None else _digits(ds.q0), attempts=""))
        for t in range(ds.n_rounds):
            c = int(ds.chosen[t])
            rows.append(dict(
                model=ds.model, backend=ds.backend, provider=ds.provider, run=ds.run,
                round=int(ds.round_index[t]),
                corner_index="" if ds.corner_index is None else int(ds.corner_index[t]),
                price_index="" if ds.price_index is None else int(ds.price_index[t]),
                corner=_digits(ds.corners[t]),
                options=_digits(ds.options[t]),
                option=c if c > 0 else "",
                q=_digits(ds.options[t, c - 1]) if c > 0 else "",
                attempts="" if ds.attempts is None else int(ds.attempts[t]),
            ))
    path = Path(path)
    # atomic (a kill mid-export keeps the old file) and deterministic (gzip mtime 0)
    with atomic_path(path) as tmp:
        pd.DataFrame(rows, columns=_COLUMNS).to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
    return path


def _parse_digits(s: str, n: int) -> np.ndarray:
    if len(s) != n or not s.isdigit():
        raise DataError(f"expected {n} digits, got {s!r}")
    return np.frombuffer(s.encode(), dtype=np.uint8).astype(np.int64) - 48


def _read_table(path: Path) -> pd.DataFrame:
    """Read and check a tidy PSM file; every problem names the file, the row and the fix."""
    import gzip
    import zlib

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path} is empty (no header, no rows); {_fix(path)}") from None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise DataError(f"{path} cannot be read as a gzip-compressed CSV ({type(e).__name__}: {str(e)[:120]}): "
                         f"it is truncated, not gzip, or not a PSM file; {_fix(path)}") from None
    if "backend" not in df.columns and "provider" in df.columns:
        # files written before the backend had its own column held it under "provider"
        df = df.rename(columns={"provider": "backend"}).assign(provider="")
    missing = set(_COLUMNS) - set(df.columns)
    if missing:
        raise DataError(f"{path}: missing columns {sorted(missing)}; expected {_COLUMNS}")
    if not len(df):
        raise DataError(f"{path} has a header but no rows; {_fix(path)}")
    _check_rows(df, path)
    return df


def _fix(path, run=None) -> str:
    if run:
        return f"fix: re-export it from its raw records, `python -m moralkit export data/raw/{run} --out {path}`"
    return (f"fix: re-export it from its raw records (`python -m moralkit export data/raw/<run> --out {path}`) "
            "or restore it from git")


def _check_rows(df: pd.DataFrame, path: Path) -> None:
    """Duplicated or conflicting rounds, out-of-range values and NaN: one message naming file, row and fix."""
    n_prices, n_corners = len(PRICES), len(CORNERS)

    rows = df.to_dict("records")

    def fail(i, what):
        r = rows[i]
        raise DataError(f"{path}, row {i + 2} (model {r['model']!r}, round {r['round']!r}): {what}; "
                         f"{_fix(path, r['run'] or None)}")

    def integer(i, col, lo, hi, empty_ok=False):
        v = rows[i][col]
        if v == "" and empty_ok:
            return None
        if not v.isdigit() or not lo <= int(v) <= hi:
            fail(i, f"{col} must be an integer in {lo}..{hi}{' or empty' if empty_ok else ''}, got {v!r}")
        return int(v)

    seen: dict = {}
    for i, r in enumerate(rows):
        if r["model"] == "":
            fail(i, "the model label is empty")
        rd = integer(i, "round", 0, N_ROUNDS)
        key = (r["model"], rd)
        if key in seen:
            fail(i, f"round {rd} of model {r['model']!r} appears twice (first at row {seen[key] + 2})")
        seen[key] = i
        if rd == 0:
            if r["q"] and not (len(r["q"]) == 5 and all(c in "012345" for c in r["q"])):
                fail(i, f"q (round 0) must be five digits 0-5 or empty, got {r['q']!r}")
            continue
        ci = integer(i, "corner_index", 0, n_corners - 1, empty_ok=True)
        integer(i, "price_index", 0, n_prices - 1)
        integer(i, "attempts", 1, 10**6, empty_ok=True)
        corner = r["corner"]
        if len(corner) != 5 or any(c not in "05" for c in corner):
            fail(i, f"corner must be five digits 0 or 5, got {corner!r}")
        if ci is not None:
            nominal = "".join(str(int(v)) for v in CORNERS[ci])
            flipped = "".join("5" if c == "0" else "0" for c in nominal)
            if corner not in (nominal, flipped):
                fail(i, f"corner {corner} is neither corner {ci} ({nominal}) nor its flip")
        opts = r["options"]
        if not opts or len(opts) % 5 or not all(c in "012345" for c in opts):
            fail(i, "options must be 5 digits 0-5 per option")
        n_opt = len(opts) // 5
        o = integer(i, "option", 1, n_opt, empty_ok=True)
        if o is not None and r["q"] != opts[5 * (o - 1):5 * o]:
            fail(i, f"q {r['q']!r} is not option {o} ({opts[5 * (o - 1):5 * o]}) of the round")
        if o is None and r["q"]:
            fail(i, f"q {r['q']!r} is set but no option was chosen")


def read_psm(path) -> dict[str, PSMDataset]:
    """Read a tidy PSM file (or every ``*.csv.gz`` in a directory) into ``{model: PSMDataset}``.

    Strict: an empty, header-only, non-gzip or truncated file, a NaN or an out-of-range value
    (round, corner, price index, option), a corner that is not the round's corner or its flip, and a
    duplicated or conflicting round all raise :class:`~moralkit.errors.DataError` with one message
    naming the file, the row (its line in the CSV) and the fix. Files of the old layout (the backend
    under ``provider``) are still read.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from moralkit.psm.simulate import simulate_random
    >>> ds = simulate_random(0, seed=1, model="sim-r")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = read_psm(write_psm([ds], Path(d) / "sim.csv.gz"))
    >>> list(back), back["sim-r"].n_obs, bool((back["sim-r"].chosen == ds.chosen).all())
    (['sim-r'], 160, True)
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.csv.gz"))
        if not files:
            raise FileNotFoundError(f"no PSM data (*.csv.gz) in {path}")
        out: dict[str, PSMDataset] = {}
        for f in files:
            for k, v in read_psm(f).items():
                if k in out:
                    raise DataError(f"model {k!r} appears in more than one file under {path}")
                out[k] = v
        return out
    if not path.exists():
        raise FileNotFoundError(f"PSM data file not found: {path}")
    df = _read_table(path)
    out = {}
    for model, g in df.groupby("model", sort=False):
        g = g.assign(_r=g["round"].astype(int)).sort_values("_r")
        r0 = g[g["_r"] == 0]
        q0 = _parse_digits(r0["q"].iloc[0], 5) if len(r0) and r0["q"].iloc[0] else None
        c = g[g["_r"] > 0]
        n_opt = len(c["options"].iloc[0]) // 5 if len(c) else 0
        opts = np.stack([_parse_digits(s, 5 * n_opt).reshape(n_opt, 5) for s in c["options"]]) if len(c) else np.zeros((0, 0, 5), int)

        def ints(col):
            v = c[col]
            return None if (v == "").any() else v.astype(int).to_numpy()

        out[model] = PSMDataset(
            model=model,
            provider=g["provider"].iloc[0],
            backend=g["backend"].iloc[0],
            run=g["run"].iloc[0],
            corners=np.stack([_parse_digits(s, 5) for s in c["corner"]]) if len(c) else np.zeros((0, 5), int),
            prices=PRICES[c["price_index"].astype(int).to_numpy()] if len(c) else np.zeros((0, 5), int),
            options=opts,
            chosen=c["option"].replace("", "0").astype(int).to_numpy(),
            round_index=c["_r"].to_numpy(),
            corner_index=ints("corner_index"),
            price_index=ints("price_index"),
            q0=q0,
            attempts=ints("attempts"),
        )
    return out


def load_psm(data_path=None) -> tuple[Path, dict[str, PSMDataset]]:
    """The PSM datasets a notebook analyses: ``data_path``, else the project's committed PSM runs.

    Parameters
    ----------
    data_path : str or Path, optional
        A tidy ``.csv.gz`` file or a directory of them (see :func:`read_psm`). Default: the project's
        own PSM runs, :func:`moralkit.runs.run_dir` ``("psm")``.

    Returns
    -------
    path : Path
        Where the data were looked for.
    datasets : dict
        ``{model: PSMDataset}``. With the default path: empty, with a warning, when there is no data
        there yet (a fresh project before its first collection run). A malformed file still raises.

    Raises
    ------
    DataError
        When ``data_path`` was given and does not exist, or holds no PSM file or no answered
        constrained round: an explicit path is never read as "no data yet".
    """
    import warnings

    from .. import runs

    if data_path is not None:
        path = Path(data_path)
        if not path.exists():
            raise DataError(f"data_path={str(data_path)!r} does not exist; pass a tidy PSM .csv.gz file or a "
                            "folder of them (see data/psm/), or data_path=None for the committed data")
        try:
            datasets = read_psm(path)
        except FileNotFoundError as ex:
            raise DataError(f"data_path={str(data_path)!r} holds no PSM data file (*.csv.gz); pass a tidy PSM "
                            ".csv.gz file or a folder of them (see data/psm/)") from ex
        if not any(ds.n_obs > 0 for ds in datasets.values()):
            raise DataError(f"data_path={str(data_path)!r} holds no answered constrained round "
                            f"({len(datasets)} model(s), all rounds missing); collect answers first "
                            "(notebooks/01_collect.py)")
        return path, datasets
    path = runs.run_dir("psm")
    try:
        return path, read_psm(path)
    except FileNotFoundError as ex:
        warnings.warn(f"No PSM data yet: {ex}. Collect some with `python -m moralkit collect psm ...` "
                      "(see notebooks/01_collect.py).", stacklevel=2)
        return path, {}


def data_summary(datasets) -> pd.DataFrame:
    """One row per respondent: what a notebook analyses, before it analyses it.

    Parameters
    ----------
    datasets : dict {model: PSMDataset}

    Returns
    -------
    DataFrame
        ``provider``, ``backend``, ``model``, ``answered`` (answered constrained rounds), ``missing``
        (the others) and ``round0`` (``"valid"`` or ``"missing"``: the unconstrained round 0, Figure 2).

    Examples
    --------
    >>> from moralkit.psm.simulate import simulate_random
    >>> data_summary({"sim-r": simulate_random(0, seed=1, model="sim-r")})[["model", "answered", "missing"]]
       model  answered  missing
    0  sim-r       160        0
    """
    rows = [{"provider": ds.provider, "backend": ds.backend, "model": m, "answered": ds.n_obs,
             "missing": ds.n_rounds - ds.n_obs, "round0": ("valid" if ds.q0 is not None else "missing")}
            for m, ds in datasets.items()]
    return pd.DataFrame(rows, columns=["provider", "backend", "model", "answered", "missing", "round0"])
