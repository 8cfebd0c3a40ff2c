"""Billing helpers for Tallyfox subscriptions: plan prices and mid-month proration."""
