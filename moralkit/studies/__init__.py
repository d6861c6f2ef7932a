"""Studies that audit the PSM paper's methods or span both papers.

- :mod:`moralkit.studies.audit`: the PSM's methods on simulated agents (power and size of the
  random-choice test, the Table 1 convention audit, NLLS forms, partition recovery).
- :mod:`moralkit.studies.conventions`: the CCEI under other coordinate and reporting conventions
  (defined in :mod:`moralkit.psm.indices`), to read the published Table 1 (the default everywhere
  stays the standard CCEI).
- :mod:`moralkit.studies.crossmethod`: the PSM similarity matrix G against MoralChoice agreement
  (Mantel test) for models that answered both surveys.
- :mod:`moralkit.studies.replication`: a paper-calibrated replication of Section 3.3 on SIMULATED
  agents built from the published Tables 1-2, compared with the published Table 3.
"""

from . import audit, conventions, crossmethod, replication
from .audit import convention_audit, partition_recovery, power_study
from .crossmethod import cross_method, cross_method_from_data, mantel_test
from .replication import replicate

__all__ = ["audit", "conventions", "crossmethod", "replication", "power_study", "convention_audit",
           "partition_recovery", "mantel_test", "cross_method", "cross_method_from_data", "replicate"]
