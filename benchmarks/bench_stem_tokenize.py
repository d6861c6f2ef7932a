"""Benchmark: the answer mapping's tokenizer with and without the needle guards, on the committed runs' sentences.

The stemmed match of the mapping g (:mod:`moralkit.moralchoice.mapping`) tokenises every distinct answer and
every spelling of the expanded answer sets (about 33,000 sentences for the committed runs, high and low
ambiguity); a fresh clone pays all of it once (issue 30). :mod:`moralkit.moralchoice._tokenize` skips each
substitution whose needles are not in the text. This script collects the sentences as notebook 07 does
(``load_responses`` of the committed runs, no stem cache), then, in this one process, tokenises all of them
with NLTK's own tokenizer (the ``regex`` engine), with its patterns on ``re`` (the tokenizer before the
guards) and with the guarded tokenizer, and checks that the three give the same tokens.

Usage::

    .venv/bin/python benchmarks/bench_stem_tokenize.py [--repeat 3]

One line ``BENCH {json}`` (benchmarks/_record.py): ``sentences``, ``nltk_cpu_s``, ``re_cpu_s`` and
``guarded_cpu_s`` (the medians over ``--repeat`` passes), ``speedup`` (``re_cpu_s / guarded_cpu_s``) and
``identical`` (same tokens for every sentence).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import emit, load  # noqa: E402


def _cpu(fn, texts) -> tuple[float, list]:
    t0 = time.process_time()
    out = [fn(t) for t in texts]
    return time.process_time() - t0, out


def _unguard(pattern):
    return getattr(pattern, "rx", pattern)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    os.environ.pop("MORALKIT_MEMO_DIR", None)
    from moralkit import moralchoice as mc
    from moralkit import runs
    from moralkit.moralchoice import _tokenize, mapping

    start = load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ambiguity in ("high", "low"):
            mc.load_responses(ambiguity, own_data=runs.run_dir("responses"), include_shared=False)
    texts = list(mapping._STEMS)
    nltk_tok, fast = _tokenize.tokenizers()
    plain = type(fast)()  # NLTK's method on the patterns compiled by re, without the guards
    for name in _tokenize._TABLES:
        table = getattr(fast, name)
        setattr(plain, name, (_unguard(table[0]), table[1]) if isinstance(table, tuple) else
                [(_unguard(t[0]), t[1]) if isinstance(t, tuple) else _unguard(t) for t in table])
    ascii_texts = [t for t in texts if _tokenize._PLAIN.match(t)]
    times = {"nltk": [], "re": [], "guarded": []}
    same = True
    for _ in range(max(1, a.repeat)):
        c0, ref = _cpu(nltk_tok.tokenize, ascii_texts)
        c1, old = _cpu(plain.tokenize, ascii_texts)
        c2, new = _cpu(_tokenize.tokenize, ascii_texts)
        times["nltk"].append(c0)
        times["re"].append(c1)
        times["guarded"].append(c2)
        same = same and ref == old == new
    med = {k: statistics.median(v) for k, v in times.items()}
    emit("stem_tokenize", "committed_runs_sentences", start, sentences=len(texts), ascii_sentences=len(ascii_texts),
         nltk_cpu_s=round(med["nltk"], 2), re_cpu_s=round(med["re"], 2), guarded_cpu_s=round(med["guarded"], 2),
         speedup=round(med["re"] / med["guarded"], 2), repeat=max(1, a.repeat), identical=same)


if __name__ == "__main__":
    main()
