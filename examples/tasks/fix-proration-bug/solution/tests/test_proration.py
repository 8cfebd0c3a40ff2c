import unittest
from datetime import date

from billing.proration import days_in_month, prorated_charge


class DaysInMonthTests(unittest.TestCase):
    def test_thirty_and_thirty_one(self):
        self.assertEqual(days_in_month(2025, 4), 30)
        self.assertEqual(days_in_month(2025, 12), 31)

    def test_february(self):
        self.assertEqual(days_in_month(2024, 2), 29)
        self.assertEqual(days_in_month(2025, 2), 28)
        self.assertEqual(days_in_month(2000, 2), 29)
        self.assertEqual(days_in_month(2100, 2), 28)


class ProratedChargeTests(unittest.TestCase):
    def test_full_month_when_changing_on_the_first(self):
        self.assertEqual(prorated_charge(3100, date(2025, 1, 1)), 3100)

    def test_mid_month(self):
        # Change on 16 January: 16..31 January is 16 days, both ends billed (FR-3).
        self.assertEqual(prorated_charge(3100, date(2025, 1, 16)), 1600)

    def test_leap_february(self):
        self.assertEqual(prorated_charge(2900, date(2024, 2, 15)), 1500)

    def test_bug_231_last_day_of_month_bills_one_day(self):
        # BUG-231: Starter ($10.35) on 30 June is one day of 30 = 34.5 cents, rounded half up (FR-7) to 35.
        self.assertEqual(prorated_charge(1035, date(2025, 6, 30)), 35)

    def test_bug_231_change_on_the_first_of_a_31_day_month(self):
        self.assertEqual(prorated_charge(3100, date(2025, 3, 1)), 3100)

    def test_rounds_half_up_not_to_even(self):
        # 999 * 5 / 30 = 166.5 -> 167 (round() would give 166).
        self.assertEqual(prorated_charge(999, date(2025, 4, 26)), 167)

    def test_free_plan(self):
        self.assertEqual(prorated_charge(0, date(2025, 3, 10)), 0)

    def test_negative_price_rejected(self):
        with self.assertRaises(ValueError):
            prorated_charge(-1, date(2025, 1, 1))


if __name__ == "__main__":
    unittest.main()
