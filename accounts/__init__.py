"""Tenants (organizations), their API keys, and key authentication for REST and WebSockets."""
