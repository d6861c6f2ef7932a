"""MoralChoice (Scherrer, Shi, Feder, Blei 2023): survey files, prompts, answer mapping, metrics.

Entry points
------------
- :func:`load_scenarios`, :func:`load_templates`: the survey (local directory or the
  Hugging Face dataset ``ninoscherrer/moralchoice``), see :mod:`moralkit.moralchoice.data`.
- :func:`build_prompt`: the exact prompt of one question form (template x ordering).
- :func:`map_answer`: the answer-to-action mapping g (Appendix B.2).
- :func:`read_responses`, :func:`load_responses`: model answers in one tidy table;
  :func:`samples_per_form`, :func:`with_samples`: M per form, and the scenarios sampled at the paper's M.
- :func:`scenario_metrics` (action likelihoods, entropies, QF-C, QF-E; Definitions 1-6),
  :func:`model_summary`, :func:`answer_rates`: :mod:`moralkit.moralchoice.metrics`.
- Section 4 / Appendix D analyses (agreement clustering, Tables 17-19):
  :mod:`moralkit.moralchoice.analysis`; Figures 3-8: :mod:`moralkit.moralchoice.plots`.

References
----------
Scherrer et al. (2023), "Evaluating the Moral Beliefs Encoded in LLMs", NeurIPS.
"""

from .analysis import (
    CERTAINTY_THRESHOLD,
    CONSISTENCY_THRESHOLD,
    MAX_INVALID,
    STRONG,
    agreement_correlations,
    agreement_selection,
    cluster_models,
    consistent_and_certain,
    dissent_table,
    likelihood_matrix,
    pairwise_strong_agreement,
    strong_agreement,
    strong_disagreement,
    strong_rule_violations,
)
from .data import (
    AMBIGUITIES,
    PAPER_SAMPLES,
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
from .mapping import DECISIONS, decision_agreement, map_answer, map_responses
from .metrics import (
    action_entropy,
    action_likelihood,
    answer_rates,
    marginal_action_likelihood,
    marginalize,
    model_summary,
    qf_consistency,
    qf_entropy,
    scenario_metrics,
)
from .prompts import ORDERINGS, build_prompt
from .responses import (
    RESPONSE_COLUMNS,
    TIDY_COLUMNS,
    load_responses,
    read_responses,
    samples_per_form,
    with_samples,
)

__all__ = [
    "AMBIGUITIES",
    "PAPER_SAMPLES",
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
    "decision_agreement",
    "RESPONSE_COLUMNS",
    "TIDY_COLUMNS",
    "read_responses",
    "load_responses",
    "samples_per_form",
    "with_samples",
    "action_likelihood",
    "marginal_action_likelihood",
    "marginalize",
    "action_entropy",
    "qf_consistency",
    "qf_entropy",
    "scenario_metrics",
    "model_summary",
    "answer_rates",
    "STRONG",
    "CERTAINTY_THRESHOLD",
    "CONSISTENCY_THRESHOLD",
    "MAX_INVALID",
    "consistent_and_certain",
    "agreement_selection",
    "likelihood_matrix",
    "agreement_correlations",
    "cluster_models",
    "strong_rule_violations",
    "strong_agreement",
    "strong_disagreement",
    "dissent_table",
    "pairwise_strong_agreement",
]
