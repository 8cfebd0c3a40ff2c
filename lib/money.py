"""Costs as JSON text: fixed-point with the models' eight decimal places, as the REST API's serializers write them."""

from decimal import Decimal

COST_PLACES = Decimal("1e-8")


def cost_text(value) -> str:
    """'0.01000000', never '0E-8' (str() of a zero Decimal with eight places) nor a float's rounding."""
    return format(Decimal(str(value)).quantize(COST_PLACES), "f")
