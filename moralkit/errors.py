"""The errors moralkit raises at its public boundaries.

Every one is a :class:`ValueError`, so ``except ValueError`` keeps working; catch
:class:`MoralkitError` to tell moralkit's own checks from other failures. An argument of the wrong
*type* raises :class:`MoralkitTypeError`, which is also a :class:`TypeError`, so ``except TypeError``
keeps working too. The messages name the problem and the fix. The command line
(``python -m moralkit``) prints them as one line and exits with status 2.

==============================  ===============================================================
class                           raised when
==============================  ===============================================================
:class:`MoralkitError`          an argument is out of range or of the wrong kind
:class:`DataError`              a data file, dataset or survey file is malformed or missing
:class:`SolverUnavailableError` an optional solver (MILP) is not installed or cannot be used
:class:`IdentificationError`    the data cannot identify a model's parameters (NLLS)
:class:`MoralkitTypeError`      an argument is of the wrong type; also a :class:`TypeError`
==============================  ===============================================================

Examples
--------
>>> from moralkit.errors import DataError, MoralkitError
>>> issubclass(DataError, MoralkitError) and issubclass(MoralkitError, ValueError)
True
>>> from moralkit.errors import MoralkitTypeError
>>> issubclass(MoralkitTypeError, MoralkitError) and issubclass(MoralkitTypeError, TypeError)
True
"""

from __future__ import annotations

__all__ = ["MoralkitError", "DataError", "SolverUnavailableError", "IdentificationError", "MoralkitTypeError"]


class MoralkitError(ValueError):
    """A check at a public boundary of moralkit failed; the message says what was expected."""


class DataError(MoralkitError):
    """Malformed or missing data: a PSM or response file, a dataset, the MoralChoice survey files."""


class SolverUnavailableError(MoralkitError):
    """An optional solver is not installed (or its licence is too small); the message says how to get it."""


class IdentificationError(MoralkitError):
    """The data do not identify the parameters of the model being fitted (too few or degenerate rounds)."""


class MoralkitTypeError(MoralkitError, TypeError):
    """An argument of the wrong type (not a wrong value): e.g. :func:`moralkit.figures.save` given a list.

    Both a :class:`MoralkitError` (so the command line prints it as one line, status 2) and a
    :class:`TypeError` (so ``except TypeError``, Python's convention for a wrong type, keeps working).
    """
