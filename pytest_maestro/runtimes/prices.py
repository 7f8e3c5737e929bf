"""The cost of tokens that an agent CLI reported without a cost (codex, gemini, opencode with a
provider that reports none), from the price table of the ``genai-prices`` package.

Such a cost is an estimate (list prices, the package's snapshot at its release; no discount, no
plan, no free tier) and is marked so wherever it is shown. A model the table does not know, or no
model named at all, gets no cost: it is noted as unpriced, never given a made-up figure.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from ..state.model import Tokens


def estimate(tokens: Tokens, model: str | None, provider: str | None = None) -> Tokens:
    """``tokens`` with a cost from the price table, marked estimated; as they are when the CLI
    gave a cost or counted no tokens; with ``model`` noted unpriced when the table has no price
    for it. ``provider`` is the table's id (``openai``, ``google``); a ``provider/model`` name
    (opencode's) gives its own."""
    if tokens.cost or tokens.estimated or not tokens.counted:
        return tokens
    if not model:
        return replace(tokens, unpriced=("",))
    price = _price(tokens, model, provider)
    if price is None:
        return replace(tokens, unpriced=(model,))
    return replace(tokens, cost=float(price), estimated=True)


def _price(tokens: Tokens, model: str, provider: str | None) -> Decimal | None:
    """The table's price in dollars, or None when it has none for the model."""
    import genai_prices  # a second to load its table: only where a cost is to be worked out

    name = model
    if "/" in model:
        given, name = model.split("/", 1)
        provider = provider or given
    # The table's input is every input token, the cached ones among them; ours are apart.
    usage = genai_prices.Usage(
        input_tokens=tokens.input + tokens.cached,
        cache_read_tokens=tokens.cached,
        output_tokens=tokens.output,
    )
    for tried in dict.fromkeys((provider, None)):  # a provider the table lacks: by model alone
        try:
            return genai_prices.calc_price(usage, name, provider_id=tried).total_price
        except LookupError:
            continue
        except (ValueError, ArithmeticError):  # a count or a price the table cannot work with
            return None
    return None
