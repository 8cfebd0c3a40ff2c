import unittest
from datetime import date

from billing.plans import upgrade_charge


class UpgradeChargeTests(unittest.TestCase):
    def test_upgrade_starter_to_team_mid_month(self):
        # 16-30 June is 15 days: team 2450 minus starter 517.5 -> 518.
        self.assertEqual(upgrade_charge("starter", "team", date(2025, 6, 16)), 1932)

    def test_downgrade_is_never_charged(self):
        self.assertEqual(upgrade_charge("business", "starter", date(2025, 6, 16)), 0)

    def test_unknown_plan(self):
        with self.assertRaises(ValueError):
            upgrade_charge("starter", "enterprise", date(2025, 6, 16))


if __name__ == "__main__":
    unittest.main()
