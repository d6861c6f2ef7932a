"""What tokens cost: a :class:`Price` per million input and output tokens, online and in batch.

:func:`price_for` takes the user's price (``--price-in`` / ``--price-out``) or the maintained price table
of the ``genai-prices`` package (its bundled snapshot: no network). The batch price is the table's
``processing = batch`` variant, else half the online price: OpenAI's Batch API and Anthropic's Message
Batches both bill 50 % of the standard price
(https://platform.claude.com/docs/en/build-with-claude/batch-processing; OpenAI's Batch API guide).
:mod:`moralkit.collect.cost` estimates and controls what a collection costs with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import MoralkitError

__all__ = ["Price", "price_for", "format_usd"]


def format_usd(x) -> str:
    """Dollars with enough digits to see small amounts.

    Examples
    --------
    >>> format_usd(27.0412), format_usd(0.00421), format_usd(None)
    ('$27.04', '$0.0042', 'n/a')
    """
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:.4f}"


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens, online and batch, and where the numbers come from."""

    input_mtok: float
    output_mtok: float
    batch_input_mtok: float
    batch_output_mtok: float
    source: str
    model_id: str | None = None

    def cost(self, input_tokens, output_tokens, batch: bool = False) -> float:
        """Dollars for these token counts (online or batch price)."""
        i, o = (self.batch_input_mtok, self.batch_output_mtok) if batch else (self.input_mtok, self.output_mtok)
        return (float(input_tokens) * i + float(output_tokens) * o) / 1e6

    def to_dict(self) -> dict:
        return dict(input_mtok=self.input_mtok, output_mtok=self.output_mtok, batch_input_mtok=self.batch_input_mtok,
                    batch_output_mtok=self.batch_output_mtok, source=self.source, model_id=self.model_id)


#: The organisation names moralkit records (``provider``) mapped to genai-prices provider ids.
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "google": "google", "mistral": "mistral",
                 "mistralai": "mistral", "deepseek": "deepseek", "deepseek-ai": "deepseek", "x-ai": "x-ai",
                 "xai": "x-ai", "cohere": "cohere", "meta": "meta", "meta-llama": "meta", "together": "together",
                 "openrouter": "openrouter", "groq": "groq", "fireworks": "fireworks"}


def _genai_price(model: str, provider: str | None):
    """(online input, online output, batch input, batch output, model id, version) from genai-prices, or None."""
    try:
        from importlib import metadata

        import genai_prices
    except ImportError:  # pragma: no cover - genai-prices is a dependency of the llm extra
        return None
    pid = _PROVIDER_IDS.get((provider or "").strip().lower())
    # 1,000 tokens per request: below every tier boundary (the tiers start at 128k-272k-token prompts;
    # the surveys' prompts are under 3k tokens), so the base per-token rates apply.
    usage = genai_prices.Usage(input_tokens=1000, output_tokens=1000)
    out = []
    for ctx in (None, {"processing": "batch"}):
        try:
            kw = {"provider_id": pid} if pid else {}
            p = genai_prices.calc_price(usage, model_ref=str(model), price_context=ctx, **kw)
        except LookupError:
            return None
        except Exception:  # the table does not know the model (its errors are not one class)
            return None
        out.append((float(p.input_price) * 1000, float(p.output_price) * 1000, p.model.id, p.provider.id))
    (i, o, mid, prov), (bi, bo, _, _) = out
    if (bi, bo) == (i, o):  # no batch variant in the table: the providers' documented 50 %
        bi, bo = i / 2, o / 2
    return i, o, bi, bo, mid, prov, metadata.version("genai-prices")


def price_for(model: str | None, provider: str | None = None, *, price_in=None, price_out=None,
              batch_discount: float = 0.5) -> Price | None:
    """The price of ``model``: the user's (``price_in`` and ``price_out``, $ per million tokens), else
    the genai-prices table's; ``None`` when neither is known (a local model, an unknown name).

    Parameters
    ----------
    model : str
        The API model name (``gpt-5.4-mini``, ``claude-sonnet-4-5``).
    provider : str, optional
        The organisation (``OpenAI``, ``Anthropic``, ``Google``), to pick among providers that serve a
        model under the same name.
    price_in, price_out : float, optional
        A price given by the user, in dollars per million input and output tokens; both or neither.
    batch_discount : float, default 0.5
        The batch price as a share of the online one, for a user's price.

    Examples
    --------
    >>> price_for("my-model", price_in=2.0, price_out=8.0)
    Price(input_mtok=2.0, output_mtok=8.0, batch_input_mtok=1.0, batch_output_mtok=4.0, source='user', model_id='my-model')
    """
    if (price_in is None) != (price_out is None):
        raise MoralkitError("give both --price-in and --price-out (dollars per million input and output tokens), "
                            "or neither to use the genai-prices table")
    if price_in is not None:
        if not (float(price_in) >= 0 and float(price_out) >= 0):
            raise MoralkitError(f"prices must be >= 0 dollars per million tokens, got {price_in}, {price_out}")
        return Price(float(price_in), float(price_out), float(price_in) * batch_discount,
                     float(price_out) * batch_discount, "user", model)
    if not model:
        return None
    got = _genai_price(model, provider)
    if got is None:
        return None
    i, o, bi, bo, mid, prov, version = got
    return Price(i, o, bi, bo, f"genai-prices {version} ({prov})", mid)

