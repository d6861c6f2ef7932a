"""Executing one notebook with papermill, and saying where it failed.

:func:`execute_notebook` runs a jupytext notebook top to bottom with papermill and returns a
:class:`NotebookRun`: its parameters, time per cell, status and, when a cell raised, a
:class:`CellFailure` that names the cell by index, ``In [n]``, its line in the ``.py`` file and
its first source line. :func:`clear_outputs` removes a notebook's previous figures and tables
first, so that a page never mixes two runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MoralkitError
from .kernels import take_cpu_seconds
from .notebooks import DEFAULT_KERNEL, notebook_title, read_notebook, select_parameters

__all__ = ["CellFailure", "NotebookRun", "clear_outputs", "environ", "execute_notebook"]

@dataclass
class CellFailure:
    """Where and how a notebook failed.

    ``cell_index`` counts every cell of the source notebook (markdown and code,
    0-based, the papermill-injected parameters cell excluded), ``line`` is the
    1-based line of the ``.py`` file where the cell's first source line sits
    (``None`` if it could not be located).
    """

    cell_index: int | None
    cell_type: str
    execution_count: int | None
    line: int | None
    first_line: str
    ename: str
    evalue: str
    traceback: str = ""


@dataclass
class NotebookRun:
    """One executed notebook.

    ``seconds`` is its wall time; ``cpu_seconds`` the processor time of its kernel and of papermill
    (user + system, see :func:`_cpu_seconds`; ``None`` where the platform has no ``resource`` module).
    """

    source: Path
    number: str
    title: str
    parameters: dict[str, Any]
    ipynb: Path
    heading: str = ""
    html: Path | None = None
    seconds: float = 0.0
    cpu_seconds: float | None = None
    ok: bool = False
    failure: CellFailure | None = None
    cell_seconds: list[tuple[int, float]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    started: str = ""
    stderr_cells: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.stem


def clear_outputs(number: str, *folders: str | os.PathLike) -> list[Path]:
    """Delete the files ``<folder>/<number>_*`` a notebook wrote in an earlier run.

    ``run_all`` calls this before a notebook runs, so that its figures and tables on the page and
    in ``figures/`` all come from the same run (a notebook that now fails early leaves none behind).

    Returns
    -------
    list of Path
        The files removed.
    """
    if not re.fullmatch(r"\d{2}", str(number)):
        raise MoralkitError(f"number must be a two-digit notebook number like '02', got {number!r}")
    removed = []
    for folder in folders:
        d = Path(folder)
        if not d.is_dir():
            continue
        for p in sorted(d.glob(f"{number}_*")):
            if p.is_file():
                p.unlink()
                removed.append(p)
    return removed


@contextlib.contextmanager
def environ(env: Mapping[str, str] | None):
    """Set environment variables for the duration of a ``with`` block (restored afterwards)."""
    if not env:
        yield
        return
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cpu_seconds() -> float | None:
    """User + system CPU seconds of this process and of its children that have ended (the kernels
    papermill started and waited for). The difference around one notebook is that notebook's CPU time,
    since a process runs one notebook at a time."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _is_injected(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags") or []
    return "injected-parameters" in tags or "papermill-error-cell-tag" in tags


def _locate_line(py_text: str, nb_cells: Sequence, upto: int) -> int | None:
    """1-based line in the ``.py`` source of the first code line of source cell ``upto``."""
    lines = [ln.rstrip() for ln in py_text.splitlines()]
    pos = 0
    found = None
    for i, cell in enumerate(nb_cells[: upto + 1]):
        if cell.cell_type != "code":
            continue
        first = next((ln.rstrip() for ln in cell.source.splitlines() if ln.strip()), None)
        if first is None:
            continue
        hit = next((j for j in range(pos, len(lines)) if lines[j] == first), None)
        if hit is None:
            if i == upto:
                return None
            continue
        pos = hit + 1
        found = hit + 1
        if i == upto:
            return found
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _find_failure(executed, source_nb, py_text: str, exc: BaseException | None) -> CellFailure | None:
    """The first failing cell of an executed notebook, in source-notebook coordinates."""
    src_index = -1
    candidate = None
    for cell in executed.cells:
        if _is_injected(cell):
            continue
        src_index += 1
        pm = cell.get("metadata", {}).get("papermill", {})
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"
                  and not (o.get("ename") == "SystemExit" and o.get("evalue") in ("", "0"))]
        if errors:
            o = errors[0]
            candidate = (src_index, cell, o.get("ename", ""), o.get("evalue", ""),
                         _ANSI.sub("", "\n".join(o.get("traceback", []))))
            break
        if pm.get("exception") is True or pm.get("status") == "running":
            candidate = (src_index, cell, type(exc).__name__ if exc else "CellExecutionError",
                         str(exc) if exc else "", "")
            break
    if candidate is None and exc is not None:
        # no error output (e.g. the kernel died): blame the last cell that started
        src_index = -1
        for cell in executed.cells:
            if _is_injected(cell):
                continue
            src_index += 1
            if cell.cell_type == "code" and cell.get("metadata", {}).get("papermill", {}).get("start_time"):
                candidate = (src_index, cell, type(exc).__name__, str(exc).strip(), "")
    if candidate is None:
        if exc is None:
            return None
        return CellFailure(None, "", None, None, "", type(exc).__name__, str(exc).strip())
    idx, cell, ename, evalue, tb = candidate
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return CellFailure(
        cell_index=idx,
        cell_type=cell.cell_type,
        execution_count=cell.get("execution_count"),
        line=_locate_line(py_text, source_nb.cells, idx),
        first_line=first.strip(),
        ename=ename,
        evalue=evalue,
        traceback=tb,
    )


class _ParameterInferenceNoise:
    """Drop papermill's own parameter-inference warnings.

    Papermill re-parses the ``parameters`` cell with a line regex that fails on
    comments holding ``=`` or quotes, then warns "Passed unknown parameter" for
    parameters that *are* declared. :func:`select_parameters` already passes only
    the names the cell declares (parsed with :mod:`ast`), so these are noise.
    """

    def filter(self, record) -> bool:  # logging.Filter protocol
        msg = record.getMessage()
        return not msg.startswith(("Unable to parse line", "Passed unknown parameter"))


def _quiet_papermill_inference() -> None:
    import logging

    for name in ("papermill", "papermill.translators"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _ParameterInferenceNoise) for f in lg.filters):
            lg.addFilter(_ParameterInferenceNoise())


def _kernel_manager_class():
    """The kernel manager papermill runs notebooks with: quiet at shutdown, encrypted when possible.

    * jupyter_client's ``shutdown_kernel`` first interrupts the kernel (SIGINT) and only then asks it to
      shut down; ipykernel logs the interrupt as "KeyboardInterrupt caught in kernel" on the run's
      stderr, with a machine path. Here a kernel that is shutting down is not interrupted: the shutdown
      request over the control channel stops it, and jupyter_client still kills it if it does not stop.
    * ipykernel >= 7 warns on every start when its TCP channels are unencrypted; jupyter_client >= 8.10
      can provision CurveZMQ keys (``transport_encryption="auto"``), which is used when available.

    Returns None (papermill's default manager) when jupyter_client is not importable.
    """
    try:
        from jupyter_client.manager import AsyncKernelManager
    except ImportError:  # pragma: no cover
        return None
    try:
        import zmq

        encrypt = "transport_encryption" in AsyncKernelManager.class_trait_names() and zmq.has("curve")
    except ImportError:  # pragma: no cover
        encrypt = False

    class _QuietKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            if encrypt:
                self.transport_encryption = "auto"

        async def _async_interrupt_kernel(self) -> None:
            if getattr(self, "shutting_down", False):
                return  # no SIGINT on the way out (see above)
            await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd, **kw) -> None:
            from jupyter_client.provisioning.local_provisioner import LocalProvisioner

            from .kernels import warm_launch

            if type(self.provisioner) is LocalProvisioner:
                info = warm_launch(self.provisioner, kernel_cmd, **kw)
                if info is not None:
                    self._reconcile_connection_info(info)
                    return
            await super()._async_launch_kernel(kernel_cmd, **kw)

    return _QuietKernelManager


#: papermill writes the whole output notebook when every cell starts and ends; here at most this often
#: (seconds), and always at the end. Writing a notebook of 2 MB of figures costs about 30 ms of processor
#: time, 112 times in notebook 05, which was about a tenth of its run.
SAVE_EVERY = 10.0
_ENGINE = "moralkit-nbclient"


def _engine_name() -> str | None:
    """papermill's nbclient engine, registered once as ``moralkit-nbclient``, saving the output notebook at
    most every :data:`SAVE_EVERY` seconds while it runs (papermill's own final save is kept)."""
    try:
        from papermill.engines import NBClientEngine, papermill_engines
        from papermill.exceptions import PapermillException
    except ImportError:  # pragma: no cover
        return None
    try:
        papermill_engines.get_engine(_ENGINE)
    except PapermillException:

        class _ThrottledEngine(NBClientEngine):
            @classmethod
            def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
                save, last = nb_man.save, [time.monotonic()]

                def throttled(**kw):
                    if time.monotonic() - last[0] >= SAVE_EVERY:
                        save(**kw)
                        last[0] = time.monotonic()

                nb_man.save = throttled
                try:
                    return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
                finally:
                    nb_man.save = save  # papermill then records the end and saves

        papermill_engines.register(_ENGINE, _ThrottledEngine)
    return _ENGINE


def execute_notebook(source: str | os.PathLike, output: str | os.PathLike,
                     parameters: Mapping[str, Any] | None = None, *,
                     kernel_name: str = DEFAULT_KERNEL, cwd: str | os.PathLike | None = None,
                     env: Mapping[str, str] | None = None, start_timeout: int = 120) -> NotebookRun:
    """Convert one jupytext notebook and execute it with papermill.

    Parameters
    ----------
    source : path
        The ``NN_name.py`` notebook.
    output : path
        Where the executed ``.ipynb`` is written (also when it fails: it then
        holds the outputs up to the error and papermill's error banner).
    parameters : mapping, optional
        Candidate parameters; only those the notebook's ``parameters`` cell
        declares are injected (see :func:`select_parameters`).
    kernel_name : str
        Jupyter kernel, ``python3`` by default.
    cwd : path, optional
        Working directory of the kernel (default: the notebook's folder).
    env : mapping, optional
        Environment variables set while the kernel runs (e.g. ``MORALKIT_FIGURES_DIR``).

    Returns
    -------
    NotebookRun
        ``ok`` is False and ``failure`` says which cell raised what if the run failed.
        The function does not raise on notebook errors.
    """
    import papermill as pm

    _quiet_papermill_inference()
    source = Path(source)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    nb = read_notebook(source)
    params = select_parameters(nb, dict(parameters or {}))
    run = NotebookRun(source=source, number=source.name[:2], title=notebook_title(nb, source.stem),
                      parameters=params, ipynb=output, heading=notebook_title(nb, source.stem, plain=False))
    exc: BaseException | None = None
    run.started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    take_cpu_seconds()  # a warm kernel's time is reported by the kernel (see moralkit.book.kernels)
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    with environ(env):
        extra = {}
        km_class = _kernel_manager_class()
        if km_class is not None:
            extra["kernel_manager_class"] = km_class
        engine = _engine_name()
        if engine is not None:
            extra["engine_name"] = engine
        try:
            pm.execute_notebook(nb, str(output), parameters=params, kernel_name=kernel_name,
                                cwd=str(cwd or source.parent), progress_bar=False, log_output=False,
                                start_timeout=start_timeout, **extra)
        except pm.PapermillExecutionError as e:
            exc = e
        except Exception as e:  # noqa: BLE001  (dead kernel, timeout, missing kernel: reported, not raised)
            exc = e
    run.seconds = time.perf_counter() - t0
    cpu1 = _cpu_seconds()
    run.cpu_seconds = None if cpu0 is None or cpu1 is None else cpu1 - cpu0 + take_cpu_seconds()
    _read_executed(run, nb, source, output, exc)
    run.ok = exc is None and run.failure is None
    return run


def _read_executed(run: NotebookRun, nb, source: Path, output: Path, exc: BaseException | None) -> None:
    """After the run: each code cell's papermill duration, the failing cell (if any), cells that wrote to stderr."""
    import nbformat

    executed = None
    if output.exists():
        try:
            executed = nbformat.read(str(output), as_version=4)
        except Exception:  # noqa: BLE001  (a truncated notebook: the failure is reported without it)
            executed = None
    if executed is None:
        if exc is not None:
            run.failure = CellFailure(None, "", None, None, "", type(exc).__name__, str(exc).strip())
        return
    i = -1
    for cell in executed.cells:
        if _is_injected(cell):
            continue
        i += 1
        d = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if cell.cell_type == "code" and d is not None:
            run.cell_seconds.append((i, float(d)))
    run.failure = _find_failure(executed, nb, source.read_text(encoding="utf-8"), exc)
    run.stderr_cells = [i for i, cell in enumerate(c for c in executed.cells if not _is_injected(c))
                        if any(o.get("output_type") == "stream" and o.get("name") == "stderr"
                               for o in cell.get("outputs", []))]
