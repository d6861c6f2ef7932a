"""MoralChoice (Scherrer, Shi, Feder, Blei 2023): survey files, prompts, answer mapping, metrics.

Entry points
------------
- :func:`load_scenarios`, :func:`load_templates`: the survey (local directory or the
  Hugging Face dataset ``ninoscherrer/moralchoice``), see :mod:`moralkit.moralchoice.data`.
- :func:`build_prompt`: the exact prompt of one question form (template x ordering).
- :func:`map_answer`: the answer-to-action mapping g (Appendix B.2).
- :func:`read_responses`, :func:`load_responses`: model answers in one tidy table.

References
----------
Scherrer et al. (2023), "Evaluating the Moral Beliefs Encoded in LLMs", NeurIPS.
"""

from .data import (
    AMBIGUITIES,
    QUESTION_TYPES,
    RULES,
    MoralChoiceDataError,
    QuestionTemplate,
    SurveyTemplates,
    degenerate_scenarios,
    load_scenarios,
    load_templates,
    survey_source,
)
from .mapping import DECISIONS, map_answer, map_responses
from .prompts import ORDERINGS, build_prompt
from .responses import load_responses, own_data_dir, read_responses

__all__ = [
    "AMBIGUITIES",
    "QUESTION_TYPES",
    "ORDERINGS",
    "DECISIONS",
    "RULES",
    "MoralChoiceDataError",
    "QuestionTemplate",
    "SurveyTemplates",
    "survey_source",
    "load_scenarios",
    "load_templates",
    "degenerate_scenarios",
    "build_prompt",
    "map_answer",
    "map_responses",
    "read_responses",
    "load_responses",
    "own_data_dir",
]
