"""The paper's published figures, as reference data (transcribed, never computed here).

Source: Seror, A. (2025). *The Moral Mind(s) of Large Language Models*
(``../shared/papers/000_b866239868df8916.txt``), section "Figures and Tables":

* Table 1, "Rationality Test": provider, model, CCEI (stars stripped into a
  separate column), alpha, number of constrained observations. The text
  says 39 models were tested; the printed table has 37 rows, all transcribed
  here in the printed order (sorted by alpha).
* Table 2, "Utility parameters for each model passing the rationality test at
  the 5% level": panel (a) ``b_1..b_5``, panel (b) ``a_1..a_5``.
* Table 3, "Probabilistic Network Matrix G" (7 x 7, the paper's short names;
  :data:`TABLE3_FULL_NAMES` maps them to Table 1's model names).

These are the numbers a reader compares the package's own results with (the
raw LLM answers behind them are not public). They are reference figures, not
results of this package.

References
----------
Seror (2025), Tables 1-3 and their notes.
"""

from __future__ import annotations

import io

import pandas as pd

__all__ = ["SOURCE", "SOURCES", "published_table1", "published_table2", "published_table3", "TABLE3_FULL_NAMES"]

#: The paper every table here is copied from.
SOURCE = "Seror (2025), The Moral Mind(s) of Large Language Models"

#: The citation of each table (by the function's name), for a caption or a footnote.
SOURCES = {
    "published_table1": f"{SOURCE}, Table 1 (Rationality Test)",
    "published_table2": f"{SOURCE}, Table 2 (a) and (b)",
    "published_table3": f"{SOURCE}, Table 3 (Probabilistic Network Matrix G)",
}

_TABLE1 = """\
Provider\tModel\tCCEI\talpha\tNumber of Obs.
Google\tgemini-1.5-flash-exp-0827\t0.417***\t0.006\t133
Anthropic\tclaude-3-sonnet-20240229\t0.400***\t0.008\t138
OpenAI\tgpt-4-0125-preview\t0.400**\t0.020\t160
Llama\tllama3-70b\t0.389**\t0.035\t160
Llama\tQwen1.5-110B-Chat\t0.385**\t0.041\t160
Llama\tllama3.2-1b\t0.333**\t0.045\t149
Mistral\topen-mixtral-8x22b\t0.385**\t0.049\t160
Mistral\tmistral-large-2407\t0.375*\t0.099\t160
Google\tgemini-1.5-flash\t0.375*\t0.100\t149
Anthropic\tclaude-3-5-sonnet-20240620\t0.375\t0.122\t160
Google\tgemini-1.5-flash-8b-exp-0827\t0.353\t0.125\t147
Google\tgemini-1.5-flash-latest\t0.357\t0.160\t150
OpenAI\tgpt-4-turbo-preview\t0.357\t0.162\t160
Mistral\tmistral-medium-2312\t0.333\t0.208\t143
Mistral\tmistral-small-2409\t0.353\t0.220\t160
OpenAI\tgpt-4-turbo\t0.333\t0.227\t160
Mistral\topen-codestral-mamba\t0.308\t0.235\t160
OpenAI\tgpt-4-0613\t0.333\t0.245\t160
Mistral\topen-mistral-nemo\t0.333\t0.286\t160
OpenAI\tgpt-4o\t0.333\t0.301\t160
OpenAI\tgpt-3.5-turbo-0125\t0.294\t0.376\t160
Llama\tgemma2-27b\t0.294\t0.380\t160
Llama\tQwen2-72B-Instruct\t0.318\t0.447\t160
Llama\tmixtral-8x22b-instruct\t0.316\t0.478\t160
Mistral\tministral-3b-2410\t0.286\t0.589\t160
OpenAI\tgpt-3.5-turbo-1106\t0.294\t0.606\t160
OpenAI\tgpt-3.5-turbo\t0.267\t0.641\t160
Llama\tgemma2-9b\t0.273\t0.722\t160
OpenAI\tgpt-4o-mini\t0.267\t0.804\t160
Llama\tllama3.1-8b\t0.250\t0.830\t160
Mistral\topen-mistral-7b\t0.231\t0.851\t125
Llama\tllama3.1-405b\t0.231\t0.883\t160
OpenAI\tgpt-4\t0.200\t0.966\t160
Google\tgemini-1.5-flash-001\t0.187\t0.974\t151
Llama\tllama3.2-3b\t0.167\t0.975\t160
Anthropic\tclaude-3-haiku-20240307\t0.167\t0.989\t160
Llama\tllama3.2-90b-vision\t0.176\t0.991\t160
"""

_TABLE2A = """\
Model\tb1\tb2\tb3\tb4\tb5
gpt-4-0125-preview\t3.05\t2.39\t2.29\t3.06\t2.91
claude-3-sonnet-20240229\t2.64\t2.79\t2.43\t2.35\t2.53
open-mixtral-8x22b\t2.39\t2.47\t2.61\t2.42\t2.49
llama3.2-1b\t2.20\t2.80\t2.22\t2.36\t2.64
llama3-70b\t2.70\t2.66\t2.61\t2.35\t2.70
gemini-1.5-flash-exp-0827\t2.50\t2.26\t2.49\t2.55\t2.49
Qwen1.5-110B-Chat\t2.63\t2.41\t2.48\t2.65\t2.25
"""

_TABLE2B = """\
Model\ta1\ta2\ta3\ta4\ta5
gpt-4-0125-preview\t0.18\t0.22\t0.25\t0.22\t0.14
claude-3-sonnet-20240229\t0.19\t0.22\t0.20\t0.19\t0.20
open-mixtral-8x22b\t0.22\t0.23\t0.17\t0.19\t0.20
llama3.2-1b\t0.18\t0.19\t0.21\t0.22\t0.19
llama3-70b\t0.24\t0.21\t0.14\t0.20\t0.21
gemini-1.5-flash-exp-0827\t0.20\t0.17\t0.16\t0.25\t0.22
Qwen1.5-110B-Chat\t0.23\t0.18\t0.19\t0.18\t0.22
"""

_TABLE3 = """\
\tgpt-4\tclaude-3\tmixtral\tllama3.2\tllama3\tgemini-1.5\tQwen1.5
gpt-4\t1.00\t0.36\t0.35\t0.24\t0.34\t0.42\t0.40
claude-3\t0.36\t1.00\t0.41\t0.25\t0.36\t0.48\t0.48
mixtral\t0.35\t0.41\t1.00\t0.31\t0.30\t0.37\t0.38
llama3.2\t0.24\t0.25\t0.31\t1.00\t0.24\t0.26\t0.27
llama3\t0.34\t0.36\t0.30\t0.24\t1.00\t0.37\t0.35
gemini-1.5\t0.42\t0.48\t0.37\t0.26\t0.37\t1.00\t0.48
Qwen1.5\t0.40\t0.48\t0.38\t0.27\t0.35\t0.48\t1.00
"""

#: Table 3's short names -> Table 1 model names (from the note under Table 3).
TABLE3_FULL_NAMES = {
    "gpt-4": "gpt-4-0125-preview",
    "claude-3": "claude-3-sonnet-20240229",
    "mixtral": "open-mixtral-8x22b",
    "llama3.2": "llama3.2-1b",
    "llama3": "llama3-70b",
    "gemini-1.5": "gemini-1.5-flash-exp-0827",
    "Qwen1.5": "Qwen1.5-110B-Chat",
}

_DIMS = ("Truth", "Machine", "Consent", "Risk", "Autonomy")


def published_table1() -> pd.DataFrame:
    """Published Table 1 ("Rationality Test"), 37 rows in the printed order.

    Columns: ``provider``, ``model``, ``ccei`` (float, as printed to 3
    decimals), ``stars`` (``"***"``, ``"**"``, ``"*"`` or ``""``), ``alpha``
    (share of 1,000 random datasets with a CCEI at least as high), ``n_obs``.
    ``SOURCES["published_table1"]`` cites the paper.

    References
    ----------
    Seror (2025), Table 1 and Section 3.1.

    Examples
    --------
    >>> t = published_table1()
    >>> t.shape, list(t.columns)
    ((37, 6), ['provider', 'model', 'ccei', 'stars', 'alpha', 'n_obs'])
    """
    df = pd.read_csv(io.StringIO(_TABLE1), sep="\t", dtype=str)
    out = pd.DataFrame({
        "provider": df["Provider"],
        "model": df["Model"],
        "ccei": df["CCEI"].str.rstrip("*").astype(float),
        "stars": df["CCEI"].str.extract(r"(\**)$", expand=False).fillna(""),
        "alpha": df["alpha"].astype(float),
        "n_obs": df["Number of Obs."].astype(int),
    })
    return out


def published_table2() -> dict[str, pd.DataFrame]:
    """Published Table 2: ``{"b": panel (a), "a": panel (b)}``, index = model, columns = dimensions.

    References
    ----------
    Seror (2025), Table 2 and Section 3.2.
    """
    out = {}
    for key, txt in (("b", _TABLE2A), ("a", _TABLE2B)):
        df = pd.read_csv(io.StringIO(txt), sep="\t", index_col=0)
        df.columns = list(_DIMS)
        df.index.name = "model"
        out[key] = df
    return out


def published_table3(full_names: bool = False) -> pd.DataFrame:
    """Published Table 3 (probabilistic network matrix G), 7 x 7.

    Parameters
    ----------
    full_names : bool, default False
        Label rows/columns with Table 1's model names instead of the short names.

    References
    ----------
    Seror (2025), Table 3 and Section 3.3.
    """
    df = pd.read_csv(io.StringIO(_TABLE3), sep="\t", index_col=0)
    if full_names:
        df = df.rename(index=TABLE3_FULL_NAMES, columns=TABLE3_FULL_NAMES)
    return df

