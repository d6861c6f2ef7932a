"""Moved to :mod:`moralkit.testing.faultserver` (issue 29); this name still imports it."""

from ..testing.faultserver import (
    FATAL_FAULTS,
    FAULTS,
    TRANSIENT_FAULTS,
    USABLE_FAULTS,
    FaultServer,
    fake_answer,
    fake_prompt_logprobs,
    render_chat,
)

__all__ = ["FaultServer", "FAULTS", "TRANSIENT_FAULTS", "FATAL_FAULTS", "USABLE_FAULTS", "fake_answer",
           "fake_prompt_logprobs", "render_chat"]
