"""Plans, quotas, rate limits, the usage ledger and Stripe (built in the tenancy and billing issues)."""
