"""moralkit: a reproducible companion to two studies of the moral preferences of LLMs.

- The Priced Survey Methodology (Seror 2025): :mod:`moralkit.design`,
  :mod:`moralkit.dataset`, :mod:`moralkit.rp` (GARP/CCEI), :mod:`moralkit.rationality`,
  :mod:`moralkit.nlls`, :mod:`moralkit.partition`, :mod:`moralkit.milp`,
  :mod:`moralkit.permutation`.
- MoralChoice (Scherrer et al. 2023): :mod:`moralkit.moralchoice`.
- Collecting answers from real LLMs: :mod:`moralkit.collect`.
"""

__version__ = "0.1.0"
