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
        # Change on 16 January: the rest of the month, up to the 31st.
        self.assertEqual(prorated_charge(3100, date(2025, 1, 16)), 1500)

    def test_leap_february(self):
        self.assertEqual(prorated_charge(2900, date(2024, 2, 15)), 1500)

    def test_free_plan(self):
        self.assertEqual(prorated_charge(0, date(2025, 3, 10)), 0)

    def test_negative_price_rejected(self):
        with self.assertRaises(ValueError):
            prorated_charge(-1, date(2025, 1, 1))


if __name__ == "__main__":
    unittest.main()
