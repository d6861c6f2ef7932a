"""One registry of respondents (moralkit.respondents) covers every label of the data; no page has stale counts."""

import re
from pathlib import Path

import pytest

from moralkit import respondents
from moralkit.errors import MoralkitError

ROOT = Path(__file__).resolve().parents[1]


def test_the_registry_covers_every_respondent_of_the_data():
    from moralkit.paths import data_dir, moralchoice_dir

    present = respondents.data_labels(data_dir(), moralchoice_dir())
    assert present["psm"], "no PSM respondents found in data/psm"
    labels = set().union(*present.values())
    missing = sorted(m for m in labels if m not in respondents.REGISTRY)
    assert not missing, f"respondents missing from moralkit.respondents.REGISTRY: {missing}"
    for m in labels:
        assert respondents.describe(m, strict=True).kind in respondents.KINDS
    # the PSM data hold the seven respondents the pages describe
    kinds = sorted(respondents.kind(m) for m in present["psm"])
    assert len(present["psm"]) == 7
    assert kinds.count("persona-prompted") == 3 and kinds.count("second sampling seed") == 1
    assert kinds.count("real model") == 3


def test_the_second_seed_differs_in_the_rounds_the_registry_says():
    from moralkit.paths import data_dir
    from moralkit.psm.dataset import read_psm

    d = read_psm(data_dir() / "psm")
    base = "qwen2.5-coder-0.5b-instruct"
    assert respondents.differing_rounds(d[base], d[f"{base}-s1"]) == respondents.S1_DIFFERING_ROUNDS
    assert str(respondents.S1_DIFFERING_ROUNDS) in respondents.REGISTRY[f"{base}-s1"].what
    for p in ("care", "deontological", "utilitarian"):  # personas answered the same option sets
        assert respondents.differing_rounds(d[base], d[f"{base}+persona-{p}"]) == 0


def test_labels_outside_the_registry():
    with pytest.raises(MoralkitError, match="REGISTRY"):
        respondents.describe("someone-else", strict=True)
    assert respondents.describe("someone-else").kind == "real model"
    assert respondents.kind("sim-gpt-4") == "simulated"
    assert respondents.kind("x+persona-virtue") == "persona-prompted"
    assert respondents.kind("x-s2") == "second sampling seed"
    assert respondents.short_label("qwen2.5-coder-0.5b-instruct+persona-care (exact)") == "Q0.5B+care ex"
    shorts = [r.short for r in respondents.REGISTRY.values()]
    assert len(set(shorts)) == len(shorts)  # a legend maps each short label to one respondent


def test_legend_maps_short_labels_to_full_ids():
    labels = ["smollm2-135m-instruct (exact)", "qwen2.5-coder-0.5b-instruct-s1", "smollm2-135m-instruct (exact)"]
    assert list(respondents.legend(labels).columns) == ["short", "respondent", "kind"]
    leg = respondents.legend(labels, what=True)
    assert leg["short"].tolist() == ["SmolLM2 ex", "Q0.5B-s1"]
    assert leg["respondent"].tolist() == labels[:2]
    assert leg["what"].iloc[0].startswith("exact likelihoods")
    md = respondents.respondents_markdown()
    assert md.count("\n") == len(respondents.REGISTRY) + 1


def test_no_page_counts_the_respondents_as_two_models():
    stale = re.compile(r"two tiny|the two (tiny |small )?local models", re.I)
    hits = [f"{p.name}:{i}" for p in sorted((ROOT / "notebooks").glob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if stale.search(line)]
    assert not hits, f"stale respondent counts: {hits}"


def test_the_readme_and_the_book_index_show_the_registry():
    from moralkit.book.publish import _index_markdown

    table = respondents.respondents_markdown()
    assert table in (ROOT / "README.md").read_text(encoding="utf-8")
    assert respondents.respondents_markdown(what=False) in _index_markdown([], {}, "t")


def test_data_legend_and_seed_lines_of_notebook_01():
    """Notebook 01's respondents cell as package functions: a ✓ per place, registry order; one line per other
    run of the base model (committed data)."""
    from moralkit.paths import data_dir
    from moralkit.psm.dataset import read_psm

    base = "qwen2.5-coder-0.5b-instruct"
    present = {"psm": {base, "zz-unknown"}, "moralchoice": {base}, "moralchoice_likelihood": set(), "shared": set()}
    who = respondents.data_legend(present)
    assert who["respondent"].tolist() == [base, "zz-unknown"]  # registry first, others last
    assert list(who.columns[-4:]) == ["PSM", "MC sampled", "MC exact", "MC shared"]
    assert who.iloc[0][["PSM", "MC sampled", "MC exact"]].tolist() == ["✓", "✓", ""]
    d = read_psm(data_dir() / "psm")
    lines = respondents.seed_difference_lines(d, base)
    s1 = f"{respondents.short_label(base + '-s1')}: option sets differ from {respondents.short_label(base)}'s in " \
         f"{respondents.S1_DIFFERING_ROUNDS} of {d[base].n_rounds} rounds"
    assert s1 in lines and len(lines) == 4  # the second seed and three personas
    assert respondents.seed_difference_lines({}, base) == []
