"""One JSON line per measured figure: what every benchmark prints and ``run_all_benchmarks.py`` collects.

Each line carries the benchmark's name, the figure's key, its value(s), the date (UTC), the load
average at the start and end of the measurement, and the machine's CPU count and CPU (LLVM's name for it), so that a figure is
never read without the conditions it was measured in.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform

PREFIX = "BENCH "  # lines that start with it are the records; run_all_benchmarks.py keeps only these


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_name() -> str | None:
    """The host CPU's name as LLVM knows it (e.g. ``znver4``): records from different machines differ by 2x."""
    try:
        import llvmlite.binding as ll
    except ImportError:
        return None
    return ll.get_host_cpu_name()


def emit(bench: str, key: str, load_start: list[float], **values) -> dict:
    """Print one record line ``BENCH {json}`` and return the record."""
    rec = {"bench": bench, "key": key, **values,
           "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "load_start": load_start, "load_end": load(), "cpus": os.cpu_count(),
           "cpu": cpu_name(), "python": platform.python_version()}
    print(PREFIX + json.dumps(rec), flush=True)
    return rec


def start_serve(model: str, *args: str):
    """Start ``python -m moralkit serve --model MODEL --port 0 ARGS`` on this checkout; returns (process,
    base URL) once it prints its address (the benchmarks that query a local model through the SDK)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(root))
    p = subprocess.Popen([sys.executable, "-m", "moralkit", "serve", "--model", model, "--port", "0", *args],
                         cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    for line in p.stdout:
        if line.startswith("serving "):
            return p, line.split(" on ")[1].split(" ")[0]
    p.wait()
    raise SystemExit(f"the server did not start (exit {p.returncode})")
