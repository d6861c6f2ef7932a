"""NLTK's word tokenizer, run on the standard library's ``re`` for plain-ASCII text.

The mapping g (:mod:`moralkit.moralchoice.mapping`) tokenises every answer and every spelling of the
expanded answer sets with NLTK's :class:`~nltk.tokenize.NLTKWordTokenizer`, the tokenizer of the original
code. Since NLTK 3.9 that tokenizer runs each of its ~25 substitutions through ``nltk.redos``: the
third-party ``regex`` engine under a wall-clock timeout, a guard against pathological patterns that costs
about ten times the substitution itself. Its patterns are fixed and linear, so here they are compiled once
more with ``re`` and NLTK's own ``tokenize`` method runs on them: same patterns, same order, same code.

The two engines agree on these patterns for printable ASCII text and the usual white space (``\\t``,
``\\n``, ``\\r``, ``\\v``, ``\\f``): ``\\w``, ``\\b``, ``\\d`` and case folding are ASCII there in both.
They can differ on other characters (``re``'s ``\\s`` is ``str.isspace``, which holds for ``\\x1c``–``\\x1f``;
``regex``'s is Unicode's White_Space), so any other text goes to NLTK's tokenizer unchanged.
``tests/moralchoice/test_mapping.py`` checks that both give the same tokens.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["tokenize"]

#: Text the two engines read alike: printable ASCII and the ASCII white space.
_PLAIN = re.compile(r"[\t\n\r\x0b\x0c\x20-\x7e]*\Z")
_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.UNICODE | re.VERBOSE | re.ASCII
_TABLES = ("STARTING_QUOTES", "ENDING_QUOTES", "PUNCTUATION", "PARENS_BRACKETS", "CONVERT_PARENTHESES",
           "DOUBLE_DASHES", "CONTRACTIONS2", "CONTRACTIONS3")


def _stdlib(pattern):
    """``pattern`` (an ``nltk.redos`` pattern, a ``regex`` or an ``re`` one) compiled by ``re``."""
    inner = getattr(pattern, "_rx", pattern)
    return re.compile(inner.pattern, inner.flags & _FLAGS)


def _recompiled(table):
    """A class table of NLTKWordTokenizer recompiled: a ``(pattern, substitution)`` pair, a list of such
    pairs, or a list of patterns."""
    if isinstance(table, tuple):
        return (_stdlib(table[0]), table[1])
    return [(_stdlib(t[0]), t[1]) if isinstance(t, tuple) else _stdlib(t) for t in table]


@lru_cache(maxsize=1)
def tokenizers():
    """``(nltk, fast)``: NLTK's tokenizer, and the same class with its patterns compiled by ``re``
    (``None`` when one of them does not compile there, e.g. a possessive quantifier before Python 3.11)."""
    from nltk.tokenize import NLTKWordTokenizer

    nltk_tok = NLTKWordTokenizer()
    fast = NLTKWordTokenizer()
    try:
        for name in _TABLES:
            setattr(fast, name, _recompiled(getattr(NLTKWordTokenizer, name)))
    except (re.error, AttributeError, TypeError):
        fast = None
    return nltk_tok, fast


def tokenize(text: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(text)``, on ``re`` when ``text`` is plain ASCII."""
    nltk_tok, fast = tokenizers()
    if fast is not None and _PLAIN.match(text):
        return fast.tokenize(text)
    return nltk_tok.tokenize(text)
