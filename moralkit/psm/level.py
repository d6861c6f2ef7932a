"""The rationality level ``e`` of GARP_e: checked and converted once, at the public boundary.

Seror (2025) calls the ``e`` of Definitions 1-2 the *rationality level* (Section 2.4: "Parameter
``e in [0, 1]`` is called the rationality level of the partition"); the revealed-preference
literature calls the same number the *efficiency level* (Afriat 1972). This package uses the
paper's term throughout and ``e`` as the parameter name.

Every public function that takes one rationality level (the pooled relations, LS(e), Procedure 2,
the MILP, the permutation approach) converts it once with :func:`rationality_level` into a
:class:`RationalityLevel`, a small immutable value holding

* ``value``: the float (what is printed and stored in results), and
* ``exact``: the exact :class:`~fractions.Fraction` that every comparison ``e E[r, r]`` versus
  ``E[r, k]`` uses.

A float ``e`` is the exact binary number it holds (``rationality_level(2 / 3).exact`` lies just below
2/3); a :class:`~fractions.Fraction` or an integer is kept exactly (``Fraction(1, 3)`` is one third,
and ``value`` is its nearest float). Functions further in take the value as checked and never
convert again.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2 (Definitions 1-2) and
Section 2.4 (the rationality level of the partition). Afriat, S. N. (1972), Efficiency estimation of
production functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

import numpy as np

from ..errors import MoralkitError

__all__ = ["RationalityLevel", "rationality_level"]


@dataclass(frozen=True)
class RationalityLevel:
    """A rationality level ``e`` in [0, 1], checked: its float and its exact Fraction.

    Build it with :func:`rationality_level`, which checks the range; the functions it is handed
    on to do not check or convert it again.

    Attributes
    ----------
    value : float
        The level as a float (``float(level)``).
    exact : fractions.Fraction
        The exact level used in every comparison (``Fraction(value)`` for a float input).

    Examples
    --------
    >>> lv = rationality_level(0.5)
    >>> lv.value, lv.exact, float(lv)
    (0.5, Fraction(1, 2), 0.5)
    """

    value: float
    exact: Fraction

    def __float__(self) -> float:
        return self.value

    @property
    def float_is_exact(self) -> bool:
        """True when ``value`` is exactly ``exact`` (always so for a float input)."""
        return Fraction(self.value) == self.exact

    def __repr__(self) -> str:
        return f"RationalityLevel({self.value!r})" if self.float_is_exact else f"RationalityLevel({self.exact!r})"


def rationality_level(e) -> RationalityLevel:
    """The rationality level ``e`` checked to lie in [0, 1], as a :class:`RationalityLevel`.

    Parameters
    ----------
    e : float, int, fractions.Fraction or RationalityLevel
        The level. A float is the exact binary number it holds; a Fraction is kept exactly.

    Returns
    -------
    RationalityLevel
        ``e`` itself when it already is one.

    Raises
    ------
    MoralkitError
        ``e`` is not a number in [0, 1]; the message names the paper's value.

    Examples
    --------
    >>> from fractions import Fraction
    >>> rationality_level(Fraction(1, 3)).exact
    Fraction(1, 3)
    >>> rationality_level(2 / 3).exact < Fraction(2, 3)  # the float 2/3 lies below 2/3
    True
    """
    if isinstance(e, RationalityLevel):
        return e
    if isinstance(e, (bool, np.bool_)):
        raise MoralkitError(f"e (rationality level) must be a number in [0, 1], got {e!r}")
    if isinstance(e, (Rational, np.integer)):
        exact = Fraction(int(e)) if isinstance(e, np.integer) else Fraction(e)
        value = float(exact)
    else:
        try:
            value = float(e)
        except (TypeError, ValueError):
            raise MoralkitError(f"e (rationality level) must be a number in [0, 1], got {e!r}") from None
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            exact = None
        else:
            exact = Fraction(value)
    if exact is None or not 0 <= exact <= 1:
        raise MoralkitError(f"e (rationality level) must be in [0, 1], got {value}; "
                            "the paper uses e = 0.333, the smallest CCEI among models passing at 5 %")
    return RationalityLevel(value=value, exact=exact)
