"""moralkit.checks: the shared argument checks and their messages."""

import numpy as np
import pytest

from moralkit.checks import as_generator, check_choice, check_int
from moralkit.errors import MoralkitError


def test_check_int_accepts_whole_numbers_and_names_what_was_expected():
    assert check_int(3, "n") == 3 and check_int(3.0, "n") == 3 and check_int(np.int64(4), "n") == 4
    assert type(check_int(np.int64(4), "n")) is int
    for bad in (True, 2.5, "3", None, float("nan")):
        with pytest.raises(MoralkitError, match="n must be an integer, got"):
            check_int(bad, "n")
    with pytest.raises(MoralkitError, match="n_boot must be an integer >= 2, got 1"):
        check_int(1, "n_boot", minimum=2)
    with pytest.raises(MoralkitError, match="k must be an integer <= 5, got 6"):
        check_int(6, "k", maximum=5)


def test_check_choice_lists_the_choices():
    assert check_choice("low", ("low", "high"), "ambiguity") == "low"
    with pytest.raises(MoralkitError, match=r"ambiguity must be one of 'low', 'high', got 'mid'"):
        check_choice("mid", ("low", "high"), "ambiguity")
    with pytest.raises(MoralkitError, match="got \\[1\\]"):
        check_choice([1], frozenset({"a"}), "x")  # unhashable: not a choice, not a TypeError


def test_as_generator_keeps_streams_and_rejects_what_numpy_would_misread():
    assert as_generator(5).random() == np.random.default_rng(5).random()
    g = np.random.default_rng(1)
    assert as_generator(g) is g  # the caller's stream continues
    assert isinstance(as_generator(None), np.random.Generator)
    assert as_generator(np.random.SeedSequence(7)).random() == np.random.default_rng(np.random.SeedSequence(7)).random()
    for bad in (-1, 1.5, "0", np.random.RandomState(0)):
        with pytest.raises(MoralkitError, match="seed must be"):
            as_generator(bad)
