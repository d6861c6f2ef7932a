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

Most of these substitutions cannot apply to a given sentence (a final-period rule to a sentence without a
period, a contraction rule to one without "gonna"), yet each call scans the text. So each pattern here
carries *needles*: strings one of which the text must contain for the pattern to match at all (a necessary
condition read off the pattern, e.g. ``"'"`` for every rule about quotes or clitics); when none is in the
text, the substitution is skipped, which returns the text unchanged as ``re.sub`` would. A pattern not in
:data:`_NEEDLES` (another NLTK version) is always run. The tokenizer is 2.6 times faster for it on the
33,000 sentences a first run of notebook 07 tokenised (issue 30; ``benchmarks/bench_stem_tokenize.py``).

:func:`token_count_bounds` bounds the number of tokens of a text without tokenising it; the mapping uses it
to skip the stems that cannot be equal, which halves the sentences it tokenises (issue 30).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["tokenize", "token_count_bounds"]

#: Text the two engines read alike: printable ASCII and the ASCII white space.
_PLAIN = re.compile(r"[\t\n\r\x0b\x0c\x20-\x7e]*\Z")
_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.UNICODE | re.VERBOSE | re.ASCII
_TABLES = ("STARTING_QUOTES", "ENDING_QUOTES", "PUNCTUATION", "PARENS_BRACKETS", "CONVERT_PARENTHESES",
           "DOUBLE_DASHES", "CONTRACTIONS2", "CONTRACTIONS3")


#: pattern -> (needles, case-insensitive): the pattern can match only where the text (lowercased for a
#: case-insensitive pattern; only ASCII text takes this path) contains one of the needles.
_NEEDLES = {
    # STARTING_QUOTES
    "([«“‘„]|[`]+)": (("«", "“", "‘", "„", "`"), False),
    r'^\"': (('"',), False),
    r"(``)": (("``",), False),
    r"([ \(\[{<])(\"|\'{2})": (('"', "''"), False),
    r"(?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)": (("'",), False),
    # ENDING_QUOTES (``\s+`` is always run)
    "([»”’])": (("»", "”", "’"), False),
    r"''": (("''",), False),
    r'"': (('"',), False),
    r"([^' ])('[sS]|'[mM]|'[dD]|') ": (("'",), False),
    r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": (("'",), False),
    # PUNCTUATION
    r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*+)\s*$": ((".",), False),
    r"([:,])([^\d])": ((":", ","), False),
    r"([:,])$": ((":", ","), False),
    r"\.{2,}": (("..",), False),
    r"[;@#$%&]": ((";", "@", "#", "$", "%", "&"), False),
    r"[\u2012-\u2015]": (("\u2012", "\u2013", "\u2014", "\u2015"), False),
    r'([^\.])(\.)([\]\)}>"\']*)\s*$': ((".",), False),
    r"[?!]": (("?", "!"), False),
    r"([^'])' ": (("' ",), False),
    r"[*]": (("*",), False),
    # PARENS_BRACKETS, CONVERT_PARENTHESES, DOUBLE_DASHES
    r"[\]\[\(\)\{\}\<\>]": (("]", "[", "(", ")", "{", "}", "<", ">"), False),
    r"\(": (("(",), False), r"\)": ((")",), False), r"\[": (("[",), False), r"\]": (("]",), False),
    r"\{": (("{",), False), r"\}": (("}",), False),
    r"--": (("--",), False),
    # CONTRACTIONS2, CONTRACTIONS3 (case-insensitive)
    r"(?i)\b(can)(?#X)(not)\b": (("cannot",), True),
    r"(?i)\b(d)(?#X)('ye)\b": (("d'ye",), True),
    r"(?i)\b(gim)(?#X)(me)\b": (("gimme",), True),
    r"(?i)\b(gon)(?#X)(na)\b": (("gonna",), True),
    r"(?i)\b(got)(?#X)(ta)\b": (("gotta",), True),
    r"(?i)\b(lem)(?#X)(me)\b": (("lemme",), True),
    r"(?i)\b(more)(?#X)('n)\b": (("more'n",), True),
    r"(?i)\b(wan)(?#X)(na)(?=\s)": (("wanna",), True),
    r"(?i) ('t)(?#X)(is)\b": ((" 'tis",), True),
    r"(?i) ('t)(?#X)(was)\b": ((" 'twas",), True),
}


class _Guarded:
    """An ``re`` pattern whose :meth:`sub` skips the scan when none of its needles is in the text."""

    __slots__ = ("rx", "needles", "fold")

    def __init__(self, rx, needles, fold):
        self.rx, self.needles, self.fold = rx, needles, fold

    def sub(self, repl, text):
        hay = text.lower() if self.fold else text
        for n in self.needles:
            if n in hay:
                return self.rx.sub(repl, text)
        return text


def _stdlib(pattern):
    """``pattern`` (an ``nltk.redos`` pattern, a ``regex`` or an ``re`` one) compiled by ``re``, guarded by its
    needles when :data:`_NEEDLES` knows it."""
    inner = getattr(pattern, "_rx", pattern)
    rx = re.compile(inner.pattern, inner.flags & _FLAGS)
    if inner.pattern in _NEEDLES:
        return _Guarded(rx, *_NEEDLES[inner.pattern])
    return rx


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


#: Non-space characters that are not word characters: the only places (with the contractions below) where a
#: substitution of the tokenizer splits a word.
_PUNCT = re.compile(r"[^\w\s]")
#: The ASCII word characters and white space (``\\w``, ``\\s``; as bytes, for ``bytes.translate``).
_ASCII_WORD_SPACE = bytes(c for c in range(128) if chr(c).isalnum() or chr(c) == "_" or chr(c).isspace())
#: The contractions CONTRACTIONS2 splits without an apostrophe (can|not, gim|me, gon|na, got|ta, lem|me, wan|na).
_SPLIT_WORDS = ("cannot", "gimme", "gonna", "gotta", "lemme", "wanna")


#: Set (:func:`bounds_verified`) when a stem cache file written by the same code under the same NLTK version
#: records that the bounds hold: a process whose stems all come from the cache then needs no NLTK at all.
_BOUNDS_VERIFIED = False


def bounds_verified(mark: bool = False) -> bool:
    """Whether this process knows that :func:`token_count_bounds` holds (checked, or read from a stem cache
    file keyed on the code and the NLTK version); with ``mark``, record that it does."""
    global _BOUNDS_VERIFIED
    if mark:
        _BOUNDS_VERIFIED = True
    return _BOUNDS_VERIFIED


def _bounds_hold() -> bool:
    global _BOUNDS_VERIFIED
    if not _BOUNDS_VERIFIED:
        _BOUNDS_VERIFIED = _patterns_known()
    return _BOUNDS_VERIFIED


@lru_cache(maxsize=1)
def _patterns_known() -> bool:
    """Whether :func:`token_count_bounds` holds for the installed NLTK: its tokenizer has exactly the patterns
    the bounds were read off (those of :data:`_NEEDLES` and ``\\s+``)."""
    from nltk.tokenize import NLTKWordTokenizer

    known = set(_NEEDLES) | {r"\s+"}
    for name in _TABLES:
        table = getattr(NLTKWordTokenizer, name, None)
        if table is None:
            return False
        items = [table] if isinstance(table, tuple) else table
        for t in items:
            pat = t[0] if isinstance(t, tuple) else t
            if getattr(getattr(pat, "_rx", pat), "pattern", None) not in known:
                return False
    return True


def token_count_bounds(text: str) -> tuple[int, int] | None:
    """``(lo, hi)`` with ``lo <= len(tokenize(text)) <= hi``, without tokenising (``None`` when NLTK's patterns
    are not those the bounds were read off).

    No substitution of the tokenizer deletes a non-space character or joins two words (the only white space
    it removes is at the end of the text, and runs of it become one space), so every white-space-separated
    word gives at least one token: ``lo`` is the number of words. A word is split only next to a character
    that is neither a word character nor white space (at most both sides of it, and for an apostrophe also
    the gap before ``n't`` or after ``'t`` of ``'tis``/``'twas``: at most 3 splits each), or inside
    ``cannot``, ``gimme``, ``gonna``, ``gotta``, ``lemme``, ``wanna`` (one split each): ``hi`` adds those.
    The mapping g uses the bounds to skip stems that cannot be equal (two stemmed sentences are equal only
    with as many tokens). ``tests/moralchoice/test_mapping.py`` checks the bounds on 1,000 answers of a committed
    run, the spellings of 30 scenarios and random strings of what splits words; they held on all 33,057 sentences
    the committed runs give the mapping (issue 30).
    """
    if not _bounds_hold():
        return None
    lo = len(text.split())
    if text.isascii():
        punct = len(text.encode("ascii").translate(None, _ASCII_WORD_SPACE))
        low = text.lower()
        words = sum(low.count(w) for w in _SPLIT_WORDS)
    else:  # case folding beyond ASCII: at most one such word per five characters
        punct, words = len(_PUNCT.findall(text)), len(text) // 5
    return lo, lo + 3 * punct + words
