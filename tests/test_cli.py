"""The command line reports errors as one line and exit status 2, without a traceback."""

import subprocess
import sys

import moralkit.cli as cli
from moralkit.errors import DataError


def test_missing_run_directory_is_one_line_and_status_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "moralkit", "export", str(tmp_path / "no-such-run"),
                        "--out", str(tmp_path / "x.csv.gz")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    assert "no-such-run" in r.stderr


def test_backend_runtime_error_is_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    import moralkit.collect.psm as cpsm

    def fail(*args, **kwargs):
        raise RuntimeError("the backend failed a whole batch (last error: connection refused)")

    monkeypatch.setattr(cli.backends, "backend_from_args", lambda a, batch: None)
    monkeypatch.setattr(cpsm, "run_psm", fail)
    status = cli.main(["collect", "psm", "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert err == "error: the backend failed a whole batch (last error: connection refused)\n"


def test_moralkit_error_with_several_lines_is_joined(tmp_path, monkeypatch, capsys):
    import moralkit.collect.psm as cpsm

    def fail(*args, **kwargs):
        raise DataError("the survey files were not found:\n  1. set MORALKIT_MORALCHOICE_DIR\n  2. or ...")

    monkeypatch.setattr(cli.backends, "backend_from_args", lambda a, batch: None)
    monkeypatch.setattr(cpsm, "run_psm", fail)
    assert cli.main(["collect", "psm", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == "error: the survey files were not found:; 1. set MORALKIT_MORALCHOICE_DIR; 2. or ...\n"


def test_export_rebuilds_each_kind_of_committed_tidy_file(tmp_path, capsys):
    """`python -m moralkit export RUN` rebuilds the committed tidy file of a PSM, MoralChoice or exact-likelihood
    run byte for byte (the README: the tidy files can always be rebuilt from the raw records)."""
    from moralkit import paths

    data = paths.data_dir()
    for run, tidy in (("psm-smollm2-135m-instruct-t1-s0", "psm/smollm2-135m-instruct.csv.gz"),
                      ("mc-low-smollm2-135m-instruct-t1-s0", "moralchoice/smollm2-135m-instruct-low.csv.gz"),
                      ("mcl-low-smollm2-135m-instruct", "moralchoice_likelihood/smollm2-135m-instruct-low.csv.gz")):
        out = tmp_path / tidy  # the same file name: gzip headers hold it
        out.parent.mkdir(exist_ok=True)
        assert cli.main(["export", str(data / "raw" / run), "--out", str(out)]) in (0, None)
        assert out.read_bytes() == (data / tidy).read_bytes(), run


def test_batch_with_max_cost_is_refused_before_anything_is_sent(tmp_path, capsys):
    """A batch is paid when it runs, so --max-cost cannot stop it mid-way: `collect --batch --max-cost` is
    refused (one line, status 2) instead of ignoring the budget, and no run directory is made."""
    status = cli.main(["collect", "psm", "--backend", "openai", "--model", "gpt-4o-mini", "--batch",
                       "--max-cost", "1", "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert "--max-cost is not enforced with --batch" in err and "--dry-run" in err
    assert not (tmp_path / "run").exists()
