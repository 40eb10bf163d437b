"""Plans, limits, quotas, concurrency leases, rate limits, the usage ledger and usage summaries."""
