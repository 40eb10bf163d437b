"""Numbers as the billing page shows them: cents as dollars, counts with thousands separators."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def dollars(cents) -> str:
    if cents is None:
        return ""
    return f"${int(cents) / 100:,.2f}"


@register.filter
def thousands(value) -> str:
    if value is None:
        return ""
    return f"{int(value):,}"
