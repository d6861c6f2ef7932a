"""What a collection session did and what is left: :class:`RunReport`, and the errors that carry it.

:meth:`RunReport.line` is the completeness line every collection command prints.
:class:`CollectionIncompleteError` carries it when tasks remain undone (command-line status 3, re-run to
resume); :class:`CollectionRefusedError` when a response no retry can fix stopped the session (status 2,
the server's redacted message, no advice to re-run). :func:`incomplete_error` picks between them.
The runner (:func:`moralkit.collect.runner.run_tasks`) fills the report as responses arrive.

References
----------
Seror (2025), Section 2.1; Scherrer et al. (2023), Section 3.3.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import MoralkitError
from .prices import format_usd

__all__ = ["RunReport", "CollectionIncompleteError", "CollectionRefusedError", "incomplete_error"]


@dataclass
class RunReport:
    """What one collection session did, and what is left.

    ``tasks`` were requested; ``done`` of them are complete (``answered`` with a valid answer, the
    rest ``missing`` after ``max_attempts`` attempts without one); ``undone`` lists the others with
    their last error in ``last_errors``. ``sent`` requests this session gave ``attempts`` records
    and ``errors`` error records. ``stopped`` says why the session stopped early, if it did.
    ``busy_slot_seconds / wall_seconds`` is the mean number of requests in flight.
    """

    tasks: int = 0
    done: int = 0
    answered: int = 0
    undone: list = field(default_factory=list)
    sent: int = 0
    attempts: int = 0
    errors: int = 0
    last_errors: dict = field(default_factory=dict)
    error_types: Counter = field(default_factory=Counter)
    stopped: str | None = None
    refused: str | None = None
    wall_seconds: float = 0.0
    busy_slot_seconds: float = 0.0
    #: answers recorded with status ``length`` (empty: the output budget ran out)
    length: int = 0

    #: tokens the server counted in this session's responses (``None`` counts as 0)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: dollars of this session (``None``: no price known; see :mod:`moralkit.collect.cost`)
    cost: float | None = None
    #: dollars of the whole run so far and its ``--max-cost`` (``None`` without a budget)
    run_cost: float | None = None
    max_cost: float | None = None

    @property
    def fatal(self) -> bool:
        """The session stopped on something no retry fixes (a refused parameter, key or model): exit status 2."""
        return self.refused is not None

    @property
    def missing(self) -> int:
        return self.done - self.answered

    @property
    def complete(self) -> bool:
        return not self.undone

    @property
    def mean_busy_slots(self) -> float:
        return self.busy_slot_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def merge(self, other: "RunReport") -> "RunReport":
        """The report of two consecutive phases of one session (e.g. round 0, then the rounds)."""
        out = RunReport(
            tasks=self.tasks + other.tasks, done=self.done + other.done, answered=self.answered + other.answered,
            undone=self.undone + other.undone, sent=self.sent + other.sent, attempts=self.attempts + other.attempts,
            errors=self.errors + other.errors, last_errors={**self.last_errors, **other.last_errors},
            error_types=self.error_types + other.error_types, stopped=self.stopped or other.stopped,
            refused=self.refused or other.refused,
            wall_seconds=self.wall_seconds + other.wall_seconds,
            busy_slot_seconds=self.busy_slot_seconds + other.busy_slot_seconds, length=self.length + other.length,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0),
            run_cost=other.run_cost if other.run_cost is not None else self.run_cost,
            max_cost=other.max_cost if other.max_cost is not None else self.max_cost)
        return out

    def line(self, unit: str = "tasks", answered: str = "answered", missing: str = "missing") -> str:
        """The completeness line: ``complete: 160/160 rounds done (158 answered, 2 missing), 0 undone; ...``.

        ``unit``, ``answered`` and ``missing`` name the tasks, the valid answers and the others
        (MoralChoice: ``answers``, ``mapped to an action``, ``refusal or invalid``).
        """
        head = "complete" if self.complete else "INCOMPLETE"
        s = (f"{head}: {self.done}/{self.tasks} {unit} done ({self.answered} {answered}, {self.missing} {missing}), "
             f"{len(self.undone)} undone; this session: {self.sent} requests, {self.attempts} answers recorded, "
             f"{self.errors} errors retried or left")
        if self.error_types:
            s += " (" + ", ".join(f"{k} {v}" for k, v in self.error_types.most_common()) + ")"
        if self.length:
            s += (f"; {self.length} answers empty at the output budget (status length: raise --max-tokens, "
                  "reasoning models spend it on hidden reasoning)")
        return s + self.cost_text()

    def cost_text(self) -> str:
        """``; tokens 12,345 in / 678 out, $0.0123`` (and the run's cost against ``--max-cost``)."""
        s = f"; tokens {self.prompt_tokens:,} in / {self.completion_tokens:,} out"
        if self.cost is not None:
            s += f", {format_usd(self.cost)}"
        if self.max_cost is not None and self.run_cost is not None:
            s += (f"; run so far {format_usd(self.run_cost)} of --max-cost {format_usd(self.max_cost)}, "
                  f"{format_usd(self.max_cost - self.run_cost)} remains")
        return s

    def problem(self) -> str | None:
        """Why the session is incomplete, naming requests and the server's message; ``None`` if complete."""
        if self.complete:
            return None
        parts = []
        if self.stopped:
            parts.append(f"stopped: {self.stopped}")
        named = [(t, self.last_errors[t]) for t in self.undone if t in self.last_errors]
        for t, e in named[:3]:
            parts.append(f"request {t!r} failed: {e}")
        if len(named) > 3:
            parts.append(f"... and {len(named) - 3} more failed requests")
        n_unsent = len(self.undone) - len(named)
        if n_unsent:
            parts.append(f"{n_unsent} task(s) not sent or not finished")
        if self.refused:
            if re.search(r"\bHTTP (400|422)\b", self.refused):  # a parameter the server refuses
                return "; ".join(parts) + (". Retrying cannot fix this: change what the message names and re-run to "
                                           "resume. Completed records are saved.")
            return "; ".join(parts) + (". Retrying cannot fix this: check the key (the environment variable named "
                                       "by --api-key-env), the model name and the base URL. Completed records "
                                       "are saved.")
        return "; ".join(parts) + ". Completed records are saved; re-run the same command to resume."

    def to_dict(self) -> dict:
        return dict(tasks=self.tasks, done=self.done, answered=self.answered, missing=self.missing,
                    undone=len(self.undone), sent=self.sent, attempts=self.attempts, errors=self.errors,
                    error_types=dict(self.error_types), stopped=self.stopped, length=self.length, fatal=self.fatal,
                    mean_busy_slots=round(self.mean_busy_slots, 3), prompt_tokens=self.prompt_tokens,
                    completion_tokens=self.completion_tokens,
                    cost_usd=None if self.cost is None else round(self.cost, 6),
                    run_cost_usd=None if self.run_cost is None else round(self.run_cost, 6), max_cost_usd=self.max_cost)


class CollectionIncompleteError(MoralkitError):
    """A collection session ended with tasks undone. ``report`` (a :class:`RunReport`) says which and why.

    Every completed record is saved: re-running the same command resumes.
    """

    def __init__(self, report: RunReport, *labels: str):
        self.report = report
        super().__init__(f"{report.line(*labels)}. {report.problem()}")


class CollectionRefusedError(MoralkitError):
    """A collection session was stopped by a response no retry can fix (wrong key, unknown model, a server
    that cannot do what is asked). ``report`` says what was done; the message carries the server's
    (redacted) message. The command line exits with status 2."""

    def __init__(self, report: RunReport, *labels: str):
        self.report = report
        super().__init__(f"the server refused the collection: {report.refused}. {report.problem()} "
                         f"[{report.line(*labels)}]")


def incomplete_error(report: RunReport, *labels: str) -> MoralkitError:
    """The error for a session that ended with tasks undone: :class:`CollectionRefusedError` when a
    response no retry can fix stopped it, else :class:`CollectionIncompleteError` (re-run to resume)."""
    if report.refused:
        return CollectionRefusedError(report, *labels)
    return CollectionIncompleteError(report, *labels)
