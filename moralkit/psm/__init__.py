"""The Priced Survey Methodology (Seror 2025, "The Moral Mind(s) of Large Language Models").

Entry points, by section of the paper
-------------------------------------
- §2.1-2.2, the survey: :func:`make_design` (the 160 constrained rounds),
  :func:`constrained_prompt`, :func:`parse_option` (:mod:`moralkit.psm.design`); a model's
  answers in a :class:`PSMDataset`, read and written by :func:`read_psm`, :func:`load_psm`,
  :func:`write_psm` (:mod:`moralkit.psm.dataset`).
- §2.2-2.3 and Table 1, rationality: GARP and the exact CCEI in :mod:`moralkit.psm.rp`
  (:func:`~moralkit.psm.rp.ccei`, :func:`~moralkit.psm.rp.garp`,
  :func:`~moralkit.psm.rp.psm_expenditure_matrix`); the random-choice test and Table 1 in
  :mod:`moralkit.psm.rationality` (:func:`random_choice_tests`, :func:`table1`), with the
  standard CCEI by default or another index convention of :mod:`moralkit.psm.indices`
  (``index="origin/1-e"``, the paper-compatible reading of the printed Table 1).
- §3.2, Table 2, Figures 1-2, the parametric utility: :mod:`moralkit.psm.nlls`
  (:func:`fit_models`, :func:`table2`).
- §2.4 and Proposition 1, types of models: :mod:`moralkit.psm.partition`
  (:func:`pool`, :func:`largest_subset`, :func:`partition_types`; one Procedure 2 over
  the exact solver or a MILP) and the MILP :mod:`moralkit.psm.milp` (:func:`solve_ls_milp`).
- §3.3, Table 3, Figures 3-4, similarity networks: the draws and G in
  :mod:`moralkit.psm.permutation` (:func:`study_setup`, :func:`permutation_study`);
  H^alpha, :func:`table3` and the figures in :mod:`moralkit.psm.networks`.
- Simulated respondents (labelled ``sim-...``): :mod:`moralkit.psm.simulate`.
- The published tables, as printed: :mod:`moralkit.psm.reference`.

References
----------
Seror, A. (2025), "The Moral Mind(s) of Large Language Models".
"""

import importlib

# PEP 562: submodules and the names below load on first use, so that ``from moralkit.psm import rp`` does
# not pay for scipy.optimize (nlls), the MILP back ends or the simulators (issue 30: each notebook kernel
# imports this package). ``from moralkit.psm import X`` and ``moralkit.psm.X`` work as before.
_SUBMODULES = ("dataset", "design", "indices", "level", "milp", "networks", "nlls", "partition", "permutation",
               "rationality", "reference", "rp", "simulate")

#: public name -> submodule defining it
_NAMES = {
    "PSMDataset": "dataset", "load_psm": "dataset", "read_psm": "dataset", "write_psm": "dataset",
    "Design": "design", "constrained_prompt": "design", "make_design": "design", "parse_option": "design",
    "unconstrained_prompt": "design",
    "solve_ls_milp": "milp",
    "table3": "networks",
    "fit_models": "nlls", "table2": "nlls",
    "largest_subset": "partition", "partition_types": "partition",
    "permutation_study": "permutation", "study_setup": "permutation",
    "pool": "pooled",
    "random_choice_tests": "rationality", "table1": "rationality",
    "simulate_agents": "simulate", "simulate_quadratic": "simulate", "simulate_random": "simulate",
}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES) | set(_NAMES))


__all__ = [
    # modules
    "design", "dataset", "rp", "level", "indices", "rationality", "nlls", "partition", "milp", "permutation", "networks",
    "simulate",
    "reference",
    # §2.1-2.2
    "make_design", "Design", "constrained_prompt", "unconstrained_prompt", "parse_option",
    "PSMDataset", "read_psm", "load_psm", "write_psm",
    # §2.2-2.3, Table 1
    "random_choice_tests", "table1",
    # §3.2, Table 2
    "fit_models", "table2",
    # §2.4, Proposition 1
    "pool", "largest_subset", "partition_types", "solve_ls_milp",
    # §3.3, Table 3
    "study_setup", "permutation_study", "table3",
    # simulated respondents
    "simulate_quadratic", "simulate_random", "simulate_agents",
]
