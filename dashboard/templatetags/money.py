"""Numbers as the dashboard's pages show them: cents as dollars, counts with thousands separators
(dashboard.charts.number, the one formatting every page shares)."""

from __future__ import annotations

from django import template

from ..charts import number

register = template.Library()


@register.filter
def dollars(cents) -> str:
    if cents is None:
        return ""
    return f"${int(cents) / 100:,.2f}"


@register.filter
def thousands(value) -> str:
    """A count as `number` writes it ("12,345"); nothing for None."""
    return "" if value is None else number(int(value))
