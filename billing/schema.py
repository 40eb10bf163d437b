"""OpenAPI description of the API key authentication (drf-spectacular extension)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerKeyScheme(OpenApiAuthenticationExtension):
    target_class = "billing.policy.MeteredApiKeyAuthentication"
    match_subclasses = True  # OptionalApiKeyAuthentication too (its views mark the key optional)
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API key: `tts_<prefix>_<secret>`."}
