"""The rationality level e: checked once at the public boundary, one float and one exact Fraction."""

from fractions import Fraction

import numpy as np
import pytest

from moralkit.errors import MoralkitError
from moralkit.psm.dataset import PSMDataset
from moralkit.psm.design import CORNERS, PRICES
from moralkit.psm.level import RationalityLevel, rationality_level
from moralkit.psm.milp import integer_thresholds
from moralkit.psm.partition import MILPLS, garp_pooled, largest_subsets, partition_types
from moralkit.psm.pooled import pool, revealed_relations
from moralkit.psm.rp import garp, relations


def test_a_float_is_the_binary_number_it_holds_and_a_fraction_is_exact():
    f = rationality_level(2 / 3)
    assert f.value == 2 / 3 and f.exact == Fraction(2 / 3) and f.exact < Fraction(2, 3) and f.float_is_exact
    q = rationality_level(Fraction(1, 3))
    assert q.exact == Fraction(1, 3) and q.value == 1 / 3 and not q.float_is_exact
    assert rationality_level(1).exact == 1 and rationality_level(np.int64(0)).value == 0.0
    assert rationality_level(f) is f and float(f) == 2 / 3


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), "x", None, True, Fraction(4, 3)])
def test_bad_levels_are_refused_with_the_papers_value(bad):
    with pytest.raises(MoralkitError, match="rationality level"):
        rationality_level(bad)


def test_the_value_is_immutable():
    lv = rationality_level(0.5)
    with pytest.raises(AttributeError):
        lv.value = 0.7  # type: ignore[misc]
    assert isinstance(lv, RationalityLevel) and lv == rationality_level(0.5)


def test_relations_take_the_level_as_checked_and_use_its_exact_value():
    E = np.array([[12, 8], [8, 12]])
    # 12 x float(2/3) < 8: no relation; 12 x 2/3 == 8 exactly: a weak one
    assert not relations(E, rationality_level(2 / 3))[0][0, 1]
    assert relations(E, rationality_level(Fraction(2, 3)))[0][0, 1]
    for e in (0.75, 2 / 3, Fraction(2, 3), Fraction(1, 3)):
        lv = rationality_level(e)
        assert all(np.array_equal(a, b) for a, b in zip(relations(E, lv), relations(E, e)))
        assert garp(E, lv) == garp(E, e)


def _one(m, p, q):
    return PSMDataset(model=m, corners=CORNERS[[0]], prices=PRICES[[p]], options=np.array([[q]]),
                      chosen=np.array([1]), corner_index=[0], price_index=[p])


def test_a_fraction_means_the_same_level_to_the_exact_solver_and_the_milp():
    """Each answer costs 8 at the other's prices (budget 12): at exactly e = 2/3 both relations are weak
    (GARP holds, one type), just above 2/3 both are strict (a strict 2-cycle, two types)."""
    P = pool([_one("A", 0, (4, 0, 0, 4, 0)), _one("B", 1, (0, 4, 0, 4, 0))])
    for e, n_types in ((Fraction(2, 3), 1), (Fraction(2, 3) + Fraction(1, 10**20), 2), (2 / 3, 1)):
        lv = rationality_level(e)
        assert garp_pooled(P, e) == (n_types == 1)
        assert len(partition_types(P, e, seed=0).types) == n_types
        assert len(largest_subsets(P, lv)[0]) == 3 - n_types
        R0, P0 = revealed_relations(P, lv)
        assert bool(P0[0, 1]) == (n_types == 2)
        t = integer_thresholds([12], lv)[0]
        assert np.sign(t - 16) == np.sign(lv.exact * 12 - 8)
    ls = MILPLS(P, 0.5)
    assert isinstance(ls.e, RationalityLevel) and ls.e.value == 0.5
    assert partition_types(P, Fraction(2, 3), seed=0).e == 2 / 3  # results hold the float
