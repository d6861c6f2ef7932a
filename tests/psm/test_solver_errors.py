"""A broken or unlicensed MILP solver is reported as what it is, with the fix (not a TypeError deep in
Pyomo, not "not installed")."""

import stat

import pytest

from moralkit.errors import SolverUnavailableError
from moralkit.psm import milp_solvers as milp


def test_broken_glpsol_is_named_broken(tmp_path, monkeypatch):
    exe = tmp_path / "glpsol"
    exe.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nexit 139\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(milp, "find_glpsol", lambda: str(exe))
    with pytest.raises(SolverUnavailableError, match=r"glpsol at .* does not run .*exit status 139.*Segmentation"):
        milp.get_solver("glpk")


def test_unexecutable_glpsol_is_named_broken(tmp_path, monkeypatch):
    exe = tmp_path / "glpsol"
    exe.write_bytes(b"\x7fELF\x00garbage")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(milp, "find_glpsol", lambda: str(exe))
    with pytest.raises(SolverUnavailableError, match="glpsol at .* does not run"):
        milp.get_solver("glpk")


def test_expired_gurobi_licence_is_reported_as_expired(tmp_path, monkeypatch):
    pytest.importorskip("gurobipy")
    lic = tmp_path / "gurobi.lic"  # a real licence file format whose expiry date has passed
    lic.write_text("TYPE=ACADEMIC\nVERSION=12\nHOSTNAME=x\nEXPIRATION=2020-01-01\nKEY=abc\n")
    monkeypatch.setenv("GRB_LICENSE_FILE", str(lic))
    with pytest.raises(SolverUnavailableError, match=r"installed .* cannot start.*[Ll]icen[cs]e expired") as e:
        milp.get_solver("gurobi")
    assert "not installed" not in str(e.value)


def test_missing_solver_is_still_reported_as_not_installed(monkeypatch):
    monkeypatch.setattr(milp, "find_glpsol", lambda: None)
    with pytest.raises(SolverUnavailableError, match="not available; install it"):
        milp.get_solver("glpk")
