"""Request bodies refuse what they do not know: a field a serializer does not declare is a 400
naming it (a typo such as `scope` for `scopes` would otherwise return 201 and do nothing), as the
speech body does and as OpenAI's API does."""

from __future__ import annotations

from rest_framework import serializers


def unknown_parameter(name: str) -> serializers.ValidationError:
    return serializers.ValidationError({name: [f"Unknown parameter: '{name}'."]}, code="unknown_parameter")


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not declare, naming the first."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                raise unknown_parameter(unknown[0])
        return super().to_internal_value(data)


def refuse_any_body(request) -> None:
    """For actions that take no fields (revoke, rotate, cancel): a JSON body's fields are refused
    by name (no body, or an empty object, is what they expect)."""
    if request.content_type == "application/json" and request.body.strip():
        data = request.data
        if isinstance(data, dict) and data:
            raise unknown_parameter(next(iter(data)))
