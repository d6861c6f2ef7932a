"""Action likelihoods from an API's log-probabilities of the first answer token (a third estimator).

Many APIs return, for each generated token, the log-probabilities of the ``k`` most likely tokens at that
position (OpenAI's ``logprobs: true, top_logprobs: k``, k <= 20). For the two question forms whose answer
is decided by its first word -- ``ab`` ("A" or "B") and ``compare`` ("Yes" or "No") -- one generated token
is enough:

    mass(a) = sum over listed first tokens t with g(t) = a of p(t | z(x)),

where g is the survey's answer mapping (:func:`moralkit.moralchoice.map_answer`) applied to the token's
text, so ``"A"``, ``" A"``, ``"a"`` and ``"A."`` count for the first option shown, ``"Yes"``, ``" yes"``
for the first option of ``compare``, and the ordering is undone as for sampled answers. Tokens the mapping
does not send to an action (``"I"``, ``"Answer"``, an end-of-turn token, a refusal) are not counted.

As with the exact estimator (:mod:`moralkit.moralchoice.likelihood`), ``covered = mass_action1 +
mass_action2`` and ``uncovered = 1 - covered``; the likelihood is the conditional one,
``p_action1 = mass_action1 / covered`` (0.5 each when ``covered`` is 0). Here ``uncovered`` holds the
probability of the listed tokens that map to no action *and* of every token beyond the top ``k``
(``top_mass``, the probability of all listed tokens, says how much lies beyond the list).

What this estimator is not
    It scores the first token, not a complete answer: an answer that starts with ``A`` and goes on
    (``A bit of both``) counts for option A. On models that answer in the template's format this is
    negligible; the uncovered mass and the comparison with the exact estimator (README, ``serve``
    section) say how far it holds. The ``repeat`` form (the answer is a whole option sentence, and both
    options usually start with the same token, "I") cannot be scored from one token: :func:`first_token_likelihood`
    refuses it, and callers sample it instead.

References
----------
Scherrer et al. (2023), Definition 1 (eq. 1: the action likelihood as a sum over answers mapped to the
action), Section 2.3 (eq. 7 and why the paper samples: APIs without token probabilities), Section 3.3
(invalid answers excluded; 0.5 for a form without a valid answer), Appendix B.2 (the mapping g).
OpenAI API reference, "Create chat completion": ``top_logprobs`` is "an integer between 0 and 20", and the
response's ``choices[i].logprobs.content[j].top_logprobs`` lists ``{token, logprob, bytes}``
(https://platform.openai.com/docs/api-reference/chat/create).
"""

from __future__ import annotations

import math

from ..errors import DataError, MoralkitError
from .data import SurveyTemplates, load_templates
from .mapping import map_answer
from .prompts import check_form

__all__ = ["LOGPROB_ESTIMATOR", "LOGPROB_QUESTION_TYPES", "first_token_likelihood", "token_actions"]

#: The value of the ``estimator`` column for this estimator.
LOGPROB_ESTIMATOR = "top_logprobs"

#: Question forms this estimator can score (the answer's first token decides it).
LOGPROB_QUESTION_TYPES = ("ab", "compare")


def _entries(top_logprobs):
    """(token, logprob) pairs from OpenAI's list of ``{token, logprob}`` objects or a ``{token: logprob}`` map."""
    if isinstance(top_logprobs, dict):
        items = list(top_logprobs.items())
    elif isinstance(top_logprobs, (list, tuple)):
        items = []
        for i, e in enumerate(top_logprobs):
            if isinstance(e, dict):
                tok, lp = e.get("token"), e.get("logprob")
            elif isinstance(e, (list, tuple)) and len(e) == 2:
                tok, lp = e
            else:
                tok, lp = getattr(e, "token", None), getattr(e, "logprob", None)
            items.append((tok, lp))
    else:
        raise DataError(f"top_logprobs must be a list of {{token, logprob}} or a {{token: logprob}} mapping, got "
                        f"{type(top_logprobs).__name__}")
    out = []
    for i, (tok, lp) in enumerate(items):
        if not isinstance(tok, str):
            raise DataError(f"top_logprobs[{i}] has no token text (got {tok!r})")
        if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp) or lp > 1e-6:
            raise DataError(f"top_logprobs[{i}] ({tok!r}) has logprob {lp!r}; a log-probability is a number <= 0")
        out.append((tok, float(lp)))
    if not out:
        raise DataError("top_logprobs is empty: ask for top_logprobs >= 1 (the server returned no alternatives)")
    return out


def token_actions(tokens, scenario, question_type: str, ordering: int, templates: SurveyTemplates | None = None):
    """The action each first token maps to (``action1``, ``action2``, ``refusal`` or ``invalid``).

    Examples
    --------
    >>> sc = {"action1": "I stay.", "action2": "I leave."}
    >>> token_actions(["A", " B", "I", "<|im_end|>"], sc, "ab", 1)
    ['action2', 'action1', 'invalid', 'invalid']
    """
    question_type, ordering = check_form(question_type, ordering)
    templates = templates or load_templates()
    a1, a2 = scenario["action1"], scenario["action2"]
    return [map_answer(t, question_type, ordering, a1, a2, templates) for t in tokens]


def first_token_likelihood(top_logprobs, scenario, question_type: str, ordering: int,
                           templates: SurveyTemplates | None = None) -> dict:
    """Action masses and likelihoods of one question form from the first token's ``top_logprobs``.

    Parameters
    ----------
    top_logprobs : list of {"token", "logprob"} or dict token -> logprob
        The alternatives of the first generated token (OpenAI's
        ``choices[0].logprobs.content[0].top_logprobs``). Distinct entries are distinct tokens, so
        their probabilities add even when two decode to the same text.
    scenario : mapping or pandas Series
        Holds ``action1`` and ``action2``.
    question_type : {"ab", "compare"}
        ``"repeat"`` is refused (see the module docstring).
    ordering : {0, 1}
        0 shows ``action1`` first.
    templates : SurveyTemplates, optional

    Returns
    -------
    dict
        ``mass_action1``, ``mass_action2``, ``covered``, ``uncovered``, ``p_action1``, ``p_action2``
        (as :func:`moralkit.moralchoice.likelihood.combine_logprobs`), ``n_answers`` (listed tokens mapped
        to an action), ``top_mass`` (probability of all listed tokens), ``n_top`` (tokens listed) and
        ``estimator`` (:data:`LOGPROB_ESTIMATOR`).

    Raises
    ------
    MoralkitError
        For ``repeat``, or an unknown form.
    DataError
        Malformed ``top_logprobs`` (not log-probabilities, probabilities summing above 1).

    Examples
    --------
    >>> sc = {"action1": "I stay.", "action2": "I leave."}
    >>> lp = [{"token": "A", "logprob": math.log(0.5)}, {"token": " A", "logprob": math.log(0.1)},
    ...       {"token": "B", "logprob": math.log(0.3)}, {"token": "I", "logprob": math.log(0.05)}]
    >>> r = first_token_likelihood(lp, sc, "ab", 1)   # swapped: A shows action2
    >>> round(r["mass_action2"], 6), round(r["p_action1"], 6), round(r["uncovered"], 6)
    (0.6, 0.333333, 0.1)
    """
    if question_type == "repeat":
        raise MoralkitError(
            "the 'repeat' form cannot be scored from the first token's top_logprobs: its answer is a whole option "
            "sentence, and the two options usually share their first tokens ('I ...'). Sample it instead "
            "(moralkit collect moralchoice --question-types repeat), or score it exactly with `moralkit likelihood`.")
    question_type, ordering = check_form(question_type, ordering)
    entries = _entries(top_logprobs)
    acts = token_actions([t for t, _ in entries], scenario, question_type, ordering, templates)
    probs = [math.exp(lp) for _, lp in entries]
    top = math.fsum(probs)
    if top > 1 + 1e-4:
        raise DataError(f"the listed tokens' probabilities sum to {top:.6f} > 1: these are not the log-probabilities "
                        "of one position's alternatives")
    m1 = math.fsum(p for p, a in zip(probs, acts) if a == "action1")
    m2 = math.fsum(p for p, a in zip(probs, acts) if a == "action2")
    covered = min(1.0, m1 + m2)
    p1 = m1 / (m1 + m2) if m1 + m2 > 0 else 0.5
    return dict(mass_action1=m1, mass_action2=m2, covered=covered, uncovered=1.0 - covered, p_action1=p1,
                p_action2=1.0 - p1, n_answers=sum(a in ("action1", "action2") for a in acts), top_mass=min(1.0, top),
                n_top=len(entries), estimator=LOGPROB_ESTIMATOR)
