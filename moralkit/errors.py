"""The errors moralkit raises at its public boundaries.

Every one is a :class:`ValueError`, so ``except ValueError`` keeps working; catch
:class:`MoralkitError` to tell moralkit's own checks from other failures. The
messages name the problem and the fix. The command line (``python -m moralkit``)
prints them as one line and exits with status 2.

==============================  ===============================================================
class                           raised when
==============================  ===============================================================
:class:`MoralkitError`          an argument is out of range or of the wrong kind
:class:`DataError`              a data file, dataset or survey file is malformed or missing
:class:`SolverUnavailableError` an optional solver (MILP) is not installed or cannot be used
:class:`IdentificationError`    the data cannot identify a model's parameters (NLLS)
==============================  ===============================================================

Examples
--------
>>> from moralkit.errors import DataError, MoralkitError
>>> issubclass(DataError, MoralkitError) and issubclass(MoralkitError, ValueError)
True
"""

from __future__ import annotations

__all__ = ["MoralkitError", "DataError", "SolverUnavailableError", "IdentificationError"]


class MoralkitError(ValueError):
    """A check at a public boundary of moralkit failed; the message says what was expected."""


class DataError(MoralkitError):
    """Malformed or missing data: a PSM or response file, a dataset, the MoralChoice survey files."""


class SolverUnavailableError(MoralkitError):
    """An optional solver is not installed (or its licence is too small); the message says how to get it."""


class IdentificationError(MoralkitError):
    """The data do not identify the parameters of the model being fitted (too few or degenerate rounds)."""
