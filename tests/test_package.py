"""The package as users install it: one version, a licence, a citation, type information, a console script."""

import re
import subprocess
import sys
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import pytest
import yaml

import moralkit
from moralkit.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def test_version_lives_in_one_place():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "pyproject.toml must not repeat the version"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "moralkit.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", moralkit.__version__)


def test_citation_and_changelog_name_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == moralkit.__version__
    titles = [r["title"] for r in cff["references"]]
    assert "The Moral Mind(s) of Large Language Models" in titles
    assert "Evaluating the Moral Beliefs Encoded in LLMs" in titles
    assert f"## {moralkit.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_licence_file_matches_the_declared_licence():
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_version_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip().endswith(moralkit.__version__)


def test_usage_names_the_command_as_it_was_run(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/some/venv/bin/moralkit"])
    assert build_parser().format_usage().startswith("usage: moralkit ")
    monkeypatch.setattr(sys, "argv", [str(ROOT / "moralkit" / "__main__.py")])
    assert build_parser().format_usage().startswith("usage: python -m moralkit ")


@pytest.mark.slow
def test_wheel_holds_what_an_install_needs(tmp_path):
    """The wheel `pip wheel .` builds carries the type marker, the book's CSS, the licence and the console script."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("moralkit-*.whl")
    assert wheel.name.startswith(f"moralkit-{moralkit.__version__}-")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "moralkit/py.typed" in names
        assert any(n.startswith("moralkit/book/static/") and n.endswith(".css") for n in names)
        assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
        (ep,) = [n for n in names if n.endswith("entry_points.txt")]
        assert "moralkit = moralkit.cli:main" in z.read(ep).decode()


def _options(parser, path=()):
    import argparse

    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _options(sp, path + (name,))
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), a


def test_every_option_of_every_subcommand_has_help():
    missing = [(cmd, a.option_strings or a.dest) for cmd, a in _options(build_parser()) if not a.help]
    assert missing == []


def test_help_shows_defaults():
    import argparse

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["collect"]._actions[-1].choices["psm"].format_help()
    assert "(default: 1.0)" in text and "(default: 0)" in text  # --temperature, --seed
    assert "(default: None)" not in text
