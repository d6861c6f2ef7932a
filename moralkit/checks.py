"""The argument checks every public function shares: an integer in range, one of a set of choices, a generator.

Each raises :class:`moralkit.errors.MoralkitError` with a message that names the argument, what was
expected and what was given, so that a researcher sees the fix without reading the code.

Examples
--------
>>> from moralkit.checks import check_choice, check_int
>>> check_int(3.0, "n_sim", minimum=0)
3
>>> check_int(True, "n_sim")
Traceback (most recent call last):
...
moralkit.errors.MoralkitError: n_sim must be an integer, got True (bool)
>>> check_choice("mid", ("low", "high"), "ambiguity")
Traceback (most recent call last):
...
moralkit.errors.MoralkitError: ambiguity must be one of 'low', 'high', got 'mid'
"""

from __future__ import annotations

import numbers

from .errors import MoralkitError

__all__ = ["check_int", "check_choice", "as_generator"]


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int``, checked to be a whole number within ``[minimum, maximum]``.

    Integral floats (``3.0``) and NumPy integers are accepted; booleans, fractions and strings are not.

    Parameters
    ----------
    value : object
    name : str
        The argument's name, for the message.
    minimum, maximum : int, optional
        Inclusive bounds.

    Returns
    -------
    int

    Raises
    ------
    MoralkitError
        Not a whole number, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value or value != int(value):
        raise MoralkitError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    v = int(value)
    if minimum is not None and v < minimum:
        raise MoralkitError(f"{name} must be an integer >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise MoralkitError(f"{name} must be an integer <= {maximum}, got {v}")
    return v


def check_choice(value, choices, name: str):
    """``value`` when it is one of ``choices``, else a :class:`MoralkitError` listing them.

    Parameters
    ----------
    value : object
    choices : iterable
        The allowed values, in the order the message lists them.
    name : str
        The argument's name, for the message.

    Returns
    -------
    object
        ``value`` unchanged.
    """
    choices = tuple(choices)
    try:
        ok = value in choices
    except TypeError:  # an unhashable value against a set-like: not a choice
        ok = False
    if not ok:
        raise MoralkitError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def as_generator(seed, name: str = "seed"):
    """A :class:`numpy.random.Generator` from ``seed``: ``None``, an integer >= 0, a ``SeedSequence`` or a
    ``Generator`` (returned as is, so a caller's stream continues).

    Raises
    ------
    MoralkitError
        Any other value (a float, a negative integer, a legacy ``RandomState``).
    """
    import numpy as np

    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return np.random.default_rng(seed)
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return np.random.default_rng(check_int(seed, name, minimum=0))
    raise MoralkitError(f"{name} must be None, an integer >= 0, a numpy SeedSequence or Generator, "
                        f"got {seed!r} ({type(seed).__name__})")
