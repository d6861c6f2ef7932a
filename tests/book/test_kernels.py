"""Warm kernels (moralkit.book.kernels): forked kernels must be indistinguishable from launched ones."""

from __future__ import annotations

import json
import os
import sys

import pytest

from moralkit.book import kernels
from moralkit.book.execute import execute_notebook

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="warm kernels are used on Linux only")

PROBE = '''# %% [markdown]
# # Probe

# %% tags=["parameters"]
out = "state.json"

# %%
import json, os, random, sys, warnings
import matplotlib
import numpy as np

x = 0
for i in range(2_000_000):  # processor time the run must count
    x += i
state = {
    "env": {k: v for k, v in os.environ.items() if k not in ("JPY_PARENT_PID", "MORALKIT_WARM_KERNELS")},
    "parent_pid_set": os.environ.get("JPY_PARENT_PID") is not None,
    "ppid": os.getppid(), "cwd": os.getcwd(), "path": sys.path, "argv0": sys.argv[0], "argv_n": len(sys.argv),
    "backend": matplotlib.get_backend(), "rc": {k: repr(v) for k, v in matplotlib.rcParams.items()},
    "filters": [repr(f) for f in warnings.filters], "main": type(sys.modules["__main__"]).__name__,
    "own_group": os.getpgid(0) == os.getpid(), "own_session": os.getsid(0) == os.getpid(),
    "np_rand": float(np.random.rand()), "rand": random.random(),
    "matmul": float((np.random.default_rng(0).random((400, 400)) @ np.random.default_rng(1).random((400, 400))).sum()),
}
state["threads"] = len(os.listdir("/proc/self/task"))  # after a BLAS call: its threads exist again after a fork
import resource
r = resource.getrusage(resource.RUSAGE_SELF)
state["kernel_cpu"] = r.ru_utime + r.ru_stime
json.dump(state, open(out, "w"))
'''


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """The probe's state in a launched kernel and in two warm kernels, and each run's CPU seconds."""
    base = tmp_path_factory.mktemp("warm")
    # a server started by an earlier test of this process has that test's environment: start afresh
    kernels.stop_server()
    kernels._state["failed"] = False
    src = base / "probe.py"
    src.write_text(PROBE, encoding="utf-8")
    out = {}
    old = os.environ.get("MORALKIT_WARM_KERNELS")
    try:
        for name, mode in (("launched", "0"), ("warm", "1"), ("warm2", "1")):
            os.environ["MORALKIT_WARM_KERNELS"] = mode
            run = execute_notebook(src, base / f"{name}.ipynb", {"out": str(base / f"{name}.json")},
                                   env={"MORALKIT_FIGURES_DIR": str(base / "figs")})
            assert run.ok, run.failure
            out[name] = (json.loads((base / f"{name}.json").read_text()), run.cpu_seconds)
    finally:
        if old is None:
            os.environ.pop("MORALKIT_WARM_KERNELS", None)
        else:
            os.environ["MORALKIT_WARM_KERNELS"] = old
    return out


def test_a_warm_kernel_is_forked_from_the_server_not_launched(probes):
    launched, warm = probes["launched"][0], probes["warm"][0]
    assert launched["ppid"] == os.getpid()  # jupyter_client's Popen
    assert warm["ppid"] != os.getpid() and warm["ppid"] == probes["warm2"][0]["ppid"]  # the one server


def test_a_warm_kernel_sees_what_a_launched_one_sees(probes):
    launched, warm = probes["launched"][0], probes["warm"][0]
    for key in ("env", "cwd", "path", "argv0", "argv_n", "backend", "rc", "main", "threads", "matmul",
                "parent_pid_set"):
        assert warm[key] == launched[key], key
    assert warm["own_group"] and warm["own_session"] and launched["own_group"]
    # the warning filters: the launched kernel's, in its order, after those the preloaded imports added
    common = [f for f in warm["filters"] if f in launched["filters"]]
    assert common == launched["filters"]
    extra = warm["filters"][: len(warm["filters"]) - len(common)]
    assert warm["filters"][len(extra):] == launched["filters"]


def test_each_warm_kernel_gets_fresh_random_seeds(probes):
    assert probes["warm"][0]["np_rand"] != probes["warm2"][0]["np_rand"]
    assert probes["warm"][0]["rand"] != probes["warm2"][0]["rand"]


def test_a_warm_kernels_processor_time_is_counted(probes):
    """The kernel is not the launcher's child: without its report, the run would count the launcher's time only."""
    for name in ("launched", "warm"):
        state, cpu = probes[name]
        assert cpu is not None and cpu >= state["kernel_cpu"], name


def test_only_this_interpreters_ipykernel_is_forked():
    exe = sys.executable
    conn = ["-f", "/tmp/k.json"]
    assert kernels._kernel_arguments([exe, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", *conn]) == conn
    assert kernels._kernel_arguments([exe, "-m", "ipykernel_launcher", *conn, "--x=1"]) == [*conn, "--x=1"]
    assert kernels._kernel_arguments(["/usr/bin/python2", "-m", "ipykernel_launcher", *conn]) is None
    assert kernels._kernel_arguments([exe, "-m", "other_kernel", *conn]) is None
    assert kernels._kernel_arguments([exe, "-u", "-m", "ipykernel_launcher", *conn]) is None
    assert kernels._kernel_arguments([exe, "-m", "ipykernel_launcher"]) is None
    assert kernels._kernel_arguments(["R", "--slave", "-e", "IRkernel::main()", "--args", "/tmp/k.json"]) is None


def test_a_different_environment_or_the_switch_gets_a_launched_kernel(monkeypatch):
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "/tmp/k.json"]
    monkeypatch.setitem(kernels._state, "env", {"A": "1"})
    monkeypatch.setitem(kernels._state, "executable", sys.executable)
    monkeypatch.setitem(kernels._state, "failed", False)
    assert kernels.usable(cmd, {"A": "1", "JPY_PARENT_PID": "5", "MORALKIT_FIGURES_DIR": "/x"})
    assert not kernels.usable(cmd, {"A": "2"})  # read at import time, perhaps: not forked
    assert not kernels.usable(cmd, {"A": "1", "PYTHONHASHSEED": "0"})
    assert not kernels.usable(cmd, None)
    monkeypatch.setenv("MORALKIT_WARM_KERNELS", "0")
    assert not kernels.usable(cmd, {"A": "1"})


def test_a_warm_kernel_ends_when_its_server_ends(tmp_path, monkeypatch):
    """A launched kernel ends when its launcher does; a warm one when its server does (which ends with the
    launcher): it must not outlive the run."""
    import asyncio
    import time

    from moralkit.book.execute import _kernel_manager_class

    monkeypatch.setenv("MORALKIT_WARM_KERNELS", "1")
    kernels.stop_server()  # a server of an earlier test may have another environment
    monkeypatch.setitem(kernels._state, "failed", False)

    async def start():
        km = _kernel_manager_class()(kernel_name="python3")
        await km.start_kernel(cwd=str(tmp_path))
        return km

    km = asyncio.run(start())
    pid = km.provisioner.pid
    assert isinstance(km.provisioner.process, kernels._ForkedKernel)  # forked, not launched
    kernels.stop_server()  # the server ends (as when the launcher dies); the kernel is orphaned
    deadline = time.monotonic() + 120
    while km.provisioner.process.poll() is None:  # a condition, not a fixed wait
        assert time.monotonic() < deadline, "the orphaned kernel is still running"
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_every_preloaded_module_exists():
    """The server skips a module it cannot import (the kernel reports the error itself): a misspelt name
    would silently preload nothing."""
    import importlib.util

    missing = [m for m in (*kernels.PRELOAD_LAUNCHER, *kernels.PRELOAD) if importlib.util.find_spec(m) is None]
    assert missing == []
