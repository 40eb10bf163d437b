"""The overview's usage chart: characters per day as bars of an inline SVG (no script needed)."""

from __future__ import annotations

from datetime import UTC, date, timedelta

from django.utils import timezone

WIDTH, HEIGHT, GAP = 600, 160, 2


def daily_bars(by_day: dict[date, int], days: int = 30) -> dict:
    """Bars for the last `days` days (UTC, today last); `by_day` maps a day to its characters."""
    today = timezone.now().astimezone(UTC).date()
    series = [(day, by_day.get(day, 0)) for day in (today - timedelta(days=days - 1 - i) for i in range(days))]
    peak = max((v for _, v in series), default=0) or 1
    bar = WIDTH / days
    bars = [
        {
            "x": round(i * bar + GAP / 2, 1),
            "w": round(bar - GAP, 1),
            "h": round(HEIGHT * v / peak, 1),
            "y": round(HEIGHT - HEIGHT * v / peak, 1),
            "day": d.isoformat(),
            "value": v,
        }
        for i, (d, v) in enumerate(series)
    ]
    return {"bars": bars, "width": WIDTH, "height": HEIGHT, "peak": peak, "total": sum(v for _, v in series)}
