"""Plan catalogue and the charge for switching plans mid-month."""

from datetime import date

from billing.proration import prorated_charge

# Monthly list prices in cents (USD), as on the pricing page since 2025-01-01.
PLANS = {
    "starter": 1035,
    "team": 4900,
    "business": 12900,
}


def upgrade_charge(old_plan: str, new_plan: str, change_date: date) -> int:
    """Amount in cents to invoice now when a customer moves from old_plan to new_plan on change_date.

    The customer pays the prorated new plan and is credited the prorated old plan for the same days. Downgrades are
    never charged (the difference is credited at renewal instead), so the result is never negative.
    """
    try:
        old_price, new_price = PLANS[old_plan], PLANS[new_plan]
    except KeyError as exc:
        raise ValueError(f"unknown plan {exc.args[0]!r}") from None
    return max(prorated_charge(new_price, change_date) - prorated_charge(old_price, change_date), 0)
