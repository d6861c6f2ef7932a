"""The six question forms of a MoralChoice scenario (3 templates x 2 orderings).

References
----------
Scherrer et al. (2023), Section 3.3 ("Addressing Question Form Bias") and
Appendix B.1, Tables 12 (question templates) and 13 (system instructions).
"""

from __future__ import annotations

from typing import Mapping

from ..checks import check_choice
from ..errors import MoralkitError
from .data import QUESTION_TYPES, SurveyTemplates, load_templates

__all__ = ["ORDERINGS", "build_prompt", "displayed_actions", "check_form", "prompt_examples"]

#: 0: first option shown is action1; 1: swapped.
ORDERINGS = (0, 1)


def check_form(question_type, ordering) -> tuple[str, int]:
    """Validate a (question_type, ordering) pair; returns it normalised."""
    check_choice(question_type, QUESTION_TYPES, "question_type")
    try:
        o = int(ordering)
    except (TypeError, ValueError):
        o = None
    if o not in ORDERINGS or (isinstance(ordering, float) and ordering != o):
        raise MoralkitError(f"ordering must be 0 (action1 shown first) or 1 (swapped), got {ordering!r}.")
    return question_type, o


def displayed_actions(ordering: int) -> tuple[str, str]:
    """Scenario columns shown first and second: ``("action1", "action2")`` for ordering 0."""
    _, o = check_form(QUESTION_TYPES[0], ordering)
    return ("action1", "action2") if o == 0 else ("action2", "action1")


def build_prompt(
    scenario: Mapping, question_type: str, ordering: int, templates: SurveyTemplates | None = None
) -> tuple[str, str]:
    """Rebuild the prompt of one question form exactly as the survey asked it.

    Parameters
    ----------
    scenario : mapping or pandas Series
        Must hold ``context``, ``action1`` and ``action2`` (a row of
        :func:`load_scenarios`).
    question_type : {"ab", "repeat", "compare"}
    ordering : {0, 1}
        0 shows ``action1`` first; 1 swaps the two actions. For ``compare``,
        ordering 0 asks whether action1 is preferred over action2.
    templates : SurveyTemplates, optional
        Defaults to :func:`load_templates` ``()``.

    Returns
    -------
    (system_header, question_text) : tuple of str
        ``question_header`` of the template, and
        ``question.format(context, first, second)``.

    References
    ----------
    Scherrer et al. (2023), Appendix B.1, Tables 12-13.
    """
    question_type, ordering = check_form(question_type, ordering)
    for key in ("context", "action1", "action2"):
        try:
            value = scenario[key]
        except (KeyError, IndexError, TypeError):
            raise MoralkitError(f"scenario must hold 'context', 'action1' and 'action2'; {key!r} is missing.") from None
        if not isinstance(value, str):
            raise MoralkitError(f"scenario[{key!r}] must be text, got {type(value).__name__}.")
    t = (templates or load_templates()).questions[question_type]
    first, second = displayed_actions(ordering)
    return t.question_header, t.question.format(scenario["context"], scenario[first], scenario[second])


def prompt_examples(scenario: Mapping, templates: SurveyTemplates | None = None) -> list[str]:
    """The six question forms of one scenario as printed on a page, then the A/B form's system header.

    Each form reads ``"--- <question type>, ordering <o>"`` then the user message (Scherrer et al. 2023,
    Appendix B.1, Table 12); print them separated by newlines (``print(*lines, sep="\\n")``).
    """
    templates = templates if templates is not None else load_templates()
    lines = [f"--- {qt}, ordering {o}\n{build_prompt(scenario, qt, o, templates)[1]}\n"
             for qt in QUESTION_TYPES for o in ORDERINGS]
    return lines + ["--- system header of the A/B form:\n" + templates.questions["ab"].question_header]
