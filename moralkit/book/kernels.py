"""Warm kernels: notebook kernels forked from a process that has already imported their libraries.

Every notebook of ``run_all`` runs in a fresh IPython kernel. Launched the usual way (``python -m
ipykernel_launcher``), each kernel first spends about 2.5 s of processor time importing ipykernel,
NumPy, pandas, SciPy, matplotlib, numba and moralkit: the same modules for every notebook. Here the
kernel is instead forked from a small server process that imported them once (:data:`PRELOAD`). Each
forked kernel is still a new process that has run no notebook code: it gets the interpreter, the
environment, working directory, ``sys.path`` and arguments a launched kernel gets, its own session and
process group, the same matplotlib backend (ipykernel's inline backend, chosen before matplotlib is
imported, as ipykernel does), and fresh random seeds (``random`` and NumPy's legacy global generator).

A warm kernel is used only where it is indistinguishable from a launched one (:func:`usable`):

* Linux (``fork`` after these imports is unsafe on macOS; Windows has no ``fork``);
* the kernel command is ``<python> [-X...] -m ipykernel_launcher -f {connection_file} ...`` with this
  process's interpreter (the default ``python3`` kernel of this environment; any other kernel is
  launched the usual way);
* the kernel's environment equals the server's, apart from variables that jupyter_client sets for
  each kernel (``JPY_PARENT_PID``) and moralkit's (``MORALKIT_*``), which are read when a function
  runs, never at import;
* ``MORALKIT_WARM_KERNELS`` is not ``0``.

Otherwise, and whenever the server cannot be started, the kernel is launched the usual way. What
remains different does not change what a notebook computes: a launched kernel runs with ``-X
frozen_modules=off`` (for debuggers), a warm kernel without; the warning filters that the preloaded
modules install exist from the start (placed before IPython's, where the notebook's own imports would
have put them).

The server is a child of the process that runs the notebooks and the kernels are the server's
children, so their processor time reaches the launcher only when the server ends. Each kernel
therefore reports its own at exit (:func:`take_cpu_seconds`), which ``run_all`` adds to its notebook's.

References
----------
jupyter_client documentation, "Kernel Provisioning": a provisioner owns the kernel process and uses
``poll``, ``wait``, ``send_signal``, ``kill`` and ``terminate`` on it (``LocalProvisioner`` keeps a
:class:`subprocess.Popen`; :class:`_ForkedKernel` offers the same methods).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PRELOAD", "PRELOAD_LAUNCHER", "stop_server", "take_cpu_seconds", "usable", "warm_launch"]

#: modules the server imports once: the kernel's own (imported by ``ipykernel_launcher`` before anything
#: else) and, second, those the kernel or the notebooks' first cells import later
PRELOAD_LAUNCHER = ("ipykernel.kernelapp",)
PRELOAD = (
    "ipykernel.ipkernel", "matplotlib_inline.backend_inline",
    "numpy", "pandas", "scipy.optimize", "scipy.stats", "matplotlib.pyplot", "numba",
    "moralkit.figures", "moralkit.psm", "moralkit.psm.indices", "moralkit.psm.permutation",
    "moralkit.psm.nlls", "moralkit.studies.audit", "moralkit.studies.crossmethod",
    "moralkit.studies.replication", "moralkit.moralchoice", "moralkit.respondents",
)

#: environment variables that may differ between the server and a kernel (see the module doc)
_PER_KERNEL_ENV = ("JPY_PARENT_PID", "PYDEVD_DISABLE_FILE_VALIDATION", "JPY_SESSION_NAME")
_PER_KERNEL_PREFIX = ("MORALKIT_",)

_lock = threading.Lock()
_state: dict[str, Any] = {"server": None, "env": None, "executable": None, "failed": False, "hooked": False}
_cpu: list[float] = []


def _comparable(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if k not in _PER_KERNEL_ENV and not k.startswith(_PER_KERNEL_PREFIX)}


def _kernel_arguments(cmd: Sequence[str]) -> list[str] | None:
    """The kernel's own arguments if ``cmd`` is this interpreter's ``[-X...] -m ipykernel_launcher ARGS``
    with a connection file among ARGS, else ``None``."""
    cmd = list(cmd)
    try:
        i = cmd.index("-m")
    except ValueError:
        return None
    if cmd[i + 1: i + 2] != ["ipykernel_launcher"] or any(not a.startswith("-X") for a in cmd[1:i]):
        return None
    args = cmd[i + 2:]
    if "-f" not in args[:-1] and not any(a.startswith("--f=") for a in args):
        return None
    try:
        same = Path(cmd[0]).resolve() == Path(sys.executable).resolve()
    except OSError:
        return None
    return args if same else None


def usable(cmd: Sequence[str], env: Mapping[str, str] | None) -> bool:
    """Whether the kernel ``cmd`` with environment ``env`` may be forked from the server (see the module doc)."""
    if os.environ.get("MORALKIT_WARM_KERNELS", "1") == "0" or _state["failed"] or env is None:
        return False
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    if _kernel_arguments(cmd) is None:
        return False
    return _state["env"] is None or (_comparable(env) == _state["env"] and cmd[0] == _state["executable"])


class _Server:
    """The launcher's end of the server process: one request (a JSON line) per kernel, answered by its pid."""

    def __init__(self, executable: str, env: Mapping[str, str]):
        req_r, self._req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            # its own session: a Ctrl-C of the run reaches the kernels only through jupyter_client
            self.process = subprocess.Popen(
                [executable, "-c", _SERVER_MAIN, str(req_r), str(resp_w)],
                pass_fds=(req_r, resp_w), env=dict(env), stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(self._req_w)
            os.close(resp_r)
            raise
        finally:
            os.close(req_r)
            os.close(resp_w)
        self._resp = os.fdopen(resp_r, "rb")
        if self._resp.readline().strip() != b"ready":
            self.close()
            raise OSError("the warm-kernel server did not start")

    def spawn(self, request: Mapping[str, Any]) -> int:
        with _lock:  # one request and its answer at a time
            os.write(self._req_w, json.dumps(request).encode() + b"\n")
            line = self._resp.readline().strip()
        if not line.isdigit():
            raise OSError("the warm-kernel server stopped")
        return int(line)

    def close(self) -> None:
        """Stop the server (it ends when its request pipe closes) and collect it, so that its processor
        time, and its kernels', is counted among this process's children."""
        with contextlib.suppress(OSError):
            os.close(self._req_w)
        with contextlib.suppress(OSError):
            self._resp.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)


def _server(executable: str, env: Mapping[str, str]) -> _Server | None:
    """This process's server, started on first use with the first kernel's interpreter (the path its
    command names, which fixes ``sys.path``) and environment."""
    with _lock:
        if _state["server"] is None and not _state["failed"]:
            try:
                _state["server"] = _Server(executable, env)
            except OSError:
                _state["failed"] = True
                return None
            _state["env"], _state["executable"] = _comparable(env), executable
            if not _state["hooked"]:  # once per process, however many servers it starts
                atexit.register(stop_server)
                # multiprocessing's worker processes end with os._exit, after its own finalizers only
                from multiprocessing import util

                util.Finalize(None, stop_server, exitpriority=0)
                _state["hooked"] = True
        return _state["server"]


def stop_server() -> None:
    """Stop this process's warm-kernel server, if one runs. Kernels it started end with it (they watch it as
    their parent); the next warm kernel starts a new server, with that kernel's environment."""
    with _lock:
        server, _state["server"] = _state["server"], None
        _state["env"] = _state["executable"] = None
    if server is not None:
        server.close()


class _ForkedKernel:
    """The part of :class:`subprocess.Popen` that jupyter_client's ``LocalProvisioner`` uses.

    The kernel is the server's child, not this process's: it has ended when its pid is gone (the server
    collects its children at once), and its exit status and processor time are in its report file."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, report: str):
        self.pid, self._report = pid, report
        self.returncode: int | None = None
        self._cpu_before_signal: float | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self._finish()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode

    def _finish(self) -> None:
        try:
            code, cpu = Path(self._report).read_text(encoding="ascii").split()
            self.returncode = int(code)
            with _lock:
                _cpu.append(float(cpu))
        except (OSError, ValueError):  # killed before it could say: its time as last read from /proc
            self.returncode = -signal.SIGKILL
            if self._cpu_before_signal is not None:
                with _lock:
                    _cpu.append(self._cpu_before_signal)
        with contextlib.suppress(OSError):
            os.unlink(self._report)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            if sig in (signal.SIGKILL, signal.SIGTERM):  # it may not live to write its report
                self._cpu_before_signal = _proc_cpu_seconds(self.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _proc_cpu_seconds(pid: int) -> float | None:
    """User + system seconds of process ``pid`` and of its children it collected (``/proc/<pid>/stat``,
    fields 14-17; see proc(5)), or ``None``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
        fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def warm_launch(provisioner, cmd: Sequence[str], **kwargs: Any):
    """Launch the kernel of ``provisioner`` (a jupyter_client ``LocalProvisioner``) by forking it from
    the server; returns its connection info, or ``None`` when a warm kernel is not usable (the caller
    then launches it the usual way)."""
    env = kwargs.get("env")
    if not usable(cmd, env):
        return None
    server = _server(cmd[0], env)
    if server is None or not usable(cmd, env):
        return None
    fd, report = tempfile.mkstemp(prefix="moralkit-kernel-", suffix=".txt")
    os.close(fd)
    cwd = str(kwargs.get("cwd") or os.getcwd())
    env = {**env, "JPY_PARENT_PID": str(os.getpid())}  # as jupyter_client's launcher sets it
    try:
        pid = server.spawn({"argv": _kernel_arguments(cmd), "env": env, "cwd": cwd, "report": report})
    except OSError:
        _state["failed"] = True
        os.unlink(report)
        return None
    handle = _ForkedKernel(pid, report)
    provisioner.process = handle
    provisioner.pid = pid
    provisioner.pgid = None  # signals go to the kernel itself: its own process group may not exist yet
    provisioner.cwd = cwd
    return provisioner.connection_info


def take_cpu_seconds() -> float:
    """Processor seconds reported by the warm kernels of this process that ended since the last call."""
    with _lock:
        total = sum(_cpu)
        _cpu.clear()
    return total


# --- the server process: ``python -c _SERVER_MAIN REQUEST_FD RESPONSE_FD`` ----------------------------

#: the server ends with ``os._exit`` once its kernels are collected: the interpreter's teardown of the preloaded
#: modules would cost about 0.5 s of processor time at every run and has nothing to save
_SERVER_MAIN = ("import os, sys; from moralkit.book.kernels import _serve; _serve(int(sys.argv[1]), int(sys.argv[2])); "
                "sys.stdout.flush(); sys.stderr.flush(); os._exit(0)")

#: in the server: the interpreter's ``sys.path``, and the warning filters the imports of :data:`PRELOAD` added
_SERVER: dict[str, list] = {"path": [], "filters": []}


def _become_kernel(argv: list[str], env: dict[str, str], cwd: str, report: str, server: int) -> None:
    """In a forked child of the server (pid ``server``): become the kernel ``python -m ipykernel_launcher ARGV``
    would be, run it, and write ``<exit status> <processor seconds>`` to ``report`` at its end."""
    import random
    import resource
    import warnings

    code = 1
    try:
        os.setsid()  # its own session and process group, as jupyter_client's launcher gives a kernel
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        sys.path[:] = _SERVER["path"]
        sys.argv = [str(Path(sys.modules["ipykernel"].__file__).parent.parent / "ipykernel_launcher.py"), *argv]
        # the preloaded modules' warning filters go before IPython's, as if the notebook had imported them
        added = _SERVER["filters"]
        warnings.filters[:] = [f for f in warnings.filters if f not in added]
        from ipykernel import kernelapp

        try:
            # ipykernel reads JPY_PARENT_PID when it is imported, which in the server was before any kernel.
            # Its parent is the server, not the launcher: it ends when the server does (which ends when the
            # launcher does), as a launched kernel ends when its launcher does. The server's pid, not
            # os.getppid(): if the server has already ended, os.getppid() is 1, for which ipykernel starts no
            # watcher and the kernel would outlive the run; given the server's pid, it sees its parent gone
            app = kernelapp.IPKernelApp.instance(parent_handle=server)
            app.initialize(argv)
            warnings.filters[:0] = added
            warnings._filters_mutated()
            app.start()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        atexit._run_exitfuncs()
    finally:
        try:
            own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            with open(report, "w", encoding="ascii") as f:
                f.write(f"{code} {own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime!r}\n")
        finally:
            os._exit(code)


def _serve(request_fd: int, response_fd: int) -> None:
    """Import :data:`PRELOAD_LAUNCHER` and :data:`PRELOAD`, then fork one kernel per request until the
    request pipe closes."""
    import importlib
    import warnings

    _SERVER["path"] = list(sys.path[1:])  # ``-c`` put "" first; ipykernel_launcher drops its working directory
    if not os.environ.get("MPLBACKEND"):  # as ipykernel does before a notebook first imports matplotlib
        os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    for names in (PRELOAD_LAUNCHER, PRELOAD):
        before = list(warnings.filters)  # the second time: the launcher's filters are where they belong
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001,S112  (the kernel imports it, and reports any error, itself)
                continue
    _SERVER["filters"] = [f for f in warnings.filters if f not in before]
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def collect(*_):
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass

    signal.signal(signal.SIGCHLD, collect)
    server = os.getpid()
    with os.fdopen(request_fd, "rb") as requests:
        os.write(response_fd, b"ready\n")
        for line in requests:
            try:
                request = json.loads(line)
            except ValueError:
                break
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                os.close(response_fd)
                _become_kernel(request["argv"], request["env"], request["cwd"], request["report"], server)
            os.write(response_fd, b"%d\n" % pid)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    collect()
