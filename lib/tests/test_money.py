from decimal import Decimal

from lib.money import cost_text


def test_a_zero_cost_is_fixed_point_with_eight_places_not_an_exponent():
    assert str(Decimal("0E-8")) == "0E-8"  # what the models' zero cost printed before
    assert cost_text(Decimal("0E-8")) == "0.00000000"
    assert cost_text(0) == "0.00000000"


def test_a_cost_keeps_its_eight_places_whatever_type_it_comes_in():
    assert cost_text(Decimal("0.01")) == "0.01000000"
    assert cost_text(0.1) == "0.10000000"  # through str(): no binary-float tail
    assert cost_text(Decimal("12345.000000015")) == "12345.00000002"
