"""moralkit: a reproducible companion to two studies of the moral preferences of LLMs.

- :mod:`moralkit.psm`: the Priced Survey Methodology (Seror 2025), design to Table 3.
- :mod:`moralkit.moralchoice`: MoralChoice (Scherrer et al. 2023).
- :mod:`moralkit.studies`: audits of the PSM's methods and the comparison of both surveys.
- :mod:`moralkit.collect`: administering both surveys to real LLMs (``python -m moralkit``).
- :mod:`moralkit.errors`: the errors raised at the public boundaries.

The subpackages load on first use, so ``import moralkit`` stays cheap (the command line needs
neither numba nor the analysis).

Examples
--------
>>> import moralkit
>>> moralkit.psm.make_design(0).fingerprint()[:12]
'b1862a1ce3dc'
"""

import importlib

__version__ = "0.2.0"

_SUBPACKAGES = ("psm", "moralchoice", "studies", "collect", "errors")

__all__ = ["__version__", *_SUBPACKAGES]


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
