"""moralkit: a reproducible companion to two studies of the moral preferences of LLMs.

- :mod:`moralkit.psm`: the Priced Survey Methodology (Seror 2025), design to Table 3.
- :mod:`moralkit.moralchoice`: MoralChoice (Scherrer et al. 2023).
- :mod:`moralkit.studies`: audits of the PSM's methods and the comparison of both surveys.
- :mod:`moralkit.collect`: administering both surveys to real LLMs (``python -m moralkit``).
"""

__version__ = "0.1.0"
