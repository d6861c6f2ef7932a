"""Moved to :mod:`moralkit.testing.faultserver` (issue 29); this name still imports it."""

from ..testing.faultserver import FAULTS, TRANSIENT_FAULTS, USABLE_FAULTS, FaultServer, fake_answer

__all__ = ["FaultServer", "FAULTS", "TRANSIENT_FAULTS", "USABLE_FAULTS", "fake_answer"]
