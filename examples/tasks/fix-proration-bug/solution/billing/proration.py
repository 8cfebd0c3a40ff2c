"""Proration of plan charges when a customer changes plan in the middle of a billing month.

Billing months are calendar months. See README.md for the finance rules (FR-3, FR-7) this module implements.
"""

from datetime import date


def days_in_month(year: int, month: int) -> int:
    """Number of days in the given calendar month (Gregorian leap years)."""
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def prorated_charge(monthly_price_cents: int, change_date: date) -> int:
    """Charge in cents for the rest of the billing month, starting on change_date.

    The day of the change and the last day of the month are both billed (FR-3). The result is rounded half up to a
    whole cent (FR-7).
    """
    if monthly_price_cents < 0:
        raise ValueError("monthly_price_cents must not be negative")
    total_days = days_in_month(change_date.year, change_date.month)
    # FR-3: both the change day and the last day are billed, hence the + 1.
    remaining_days = total_days - change_date.day + 1
    # FR-7: exact integer arithmetic rounded half up; round() would round halves to even (0.345 -> 0.34).
    numerator = monthly_price_cents * remaining_days
    return (2 * numerator + total_days) // (2 * total_days)
