"""Import cost of a notebook's first cell (issue 30): heavy dependencies load when a function needs them.

Each of the 8 notebook kernels imports ``moralkit.psm`` and/or ``moralkit.moralchoice``; importing
scipy.optimize (through the NLLS), numba or scipy.cluster there costs every kernel CPU seconds it may
never use. The public API is unchanged: ``from moralkit.psm import X`` still gives the submodule's object.
"""

import os
import subprocess
import sys
from pathlib import Path

import moralkit.psm

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_packages_loads_no_heavy_dependency():
    code = ("import sys\n"
            "import moralkit.psm, moralkit.moralchoice, moralkit.psm.design, moralkit.psm.dataset\n"
            "heavy = ['scipy.optimize', 'scipy.cluster', 'numba', 'statsmodels', 'networkx', 'nltk']\n"
            "print([m for m in heavy if m in sys.modules])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def _top_level_names(path: Path) -> set:
    import ast

    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_every_public_name_of_psm_is_found_where_the_lazy_table_says():
    """Read from the sources (importing every submodule would cost seconds); one name is resolved for real."""
    psm = ROOT / "moralkit" / "psm"
    assert set(moralkit.psm.__all__) <= set(moralkit.psm._SUBMODULES) | set(moralkit.psm._NAMES)
    for sub in moralkit.psm._SUBMODULES:
        assert (psm / f"{sub}.py").exists() or (psm / sub / "__init__.py").exists(), sub
    for name, sub in moralkit.psm._NAMES.items():
        src = psm / f"{sub}.py" if (psm / f"{sub}.py").exists() else psm / sub / "__init__.py"
        assert name in _top_level_names(src), f"{name} is not defined in moralkit.psm.{sub}"
        assert name in dir(moralkit.psm)
    from moralkit.psm import design, make_design  # the old spelling still works

    assert make_design is design.make_design and moralkit.psm.make_design is make_design
    try:
        moralkit.psm.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
