"""Bar charts of usage per day, drawn server-side as inline SVG (templates/dashboard/bar_chart.html):
a labelled date axis, a value axis with a few round numbers, one focusable bar per day with its
tooltip text, and number formatting with thousands separators for every dashboard page (the
templates' `thousands` filter is this `number`).

Bars are placed in percent of the chart's width, so the text keeps its size at any width (a
scaled viewBox would shrink the labels to nothing on a phone); heights are in pixels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta

PAD_TOP = 10  # room for the top value label
PLOT_HEIGHT = 160
AXIS_HEIGHT = 24  # the date labels under the bars
HEIGHT = PAD_TOP + PLOT_HEIGHT + AXIS_HEIGHT
DATE_TICKS = 10  # at most, on a wide screen; a narrow one shows every third (about four)
VALUE_TICKS = 4  # about


def number(value: float | int | None, decimals: int = 0) -> str:
    """`value` with thousands separators: 12345 -> "12,345"; 1234.5 (decimals=1) -> "1,234.5"."""
    return f"{value or 0:,.{decimals}f}"


def minutes(seconds: float | None) -> str:
    """Audio seconds as minutes: one decimal, two under a minute (0.05, not a misleading 0.1 or 0.0)."""
    value = (seconds or 0) / 60
    return "0" if value == 0 else number(value, 2 if value < 1 else 1)


def days_between(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def day_label(day: date) -> str:
    return f"{day:%b} {day.day}"  # "May 3"


def long_day(day: date) -> str:
    return f"{day:%a}, {day:%b} {day.day}, {day.year}"  # "Sat, May 3, 2025"


@dataclass(frozen=True)
class Metric:
    """What a chart shows: `unit` as in "12,345 characters" (`one` as in "1 character", for counts);
    `decimals` 0 for counts."""

    unit: str
    one: str = ""
    decimals: int = 0

    def format(self, value: float) -> str:
        if self.decimals and 0 < value < 1:
            return number(value, self.decimals + 1)
        return number(value, self.decimals)

    def describe(self, value: float) -> str:
        return f"{self.format(value)} {self.one if value == 1 and self.one else self.unit}"


def _step(peak: float, integer: bool) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about VALUE_TICKS ticks up to `peak`."""
    raw = peak / VALUE_TICKS
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return max(step, 1) if integer else step


def bar_chart(series: list[tuple[date, float]], metric: Metric, chart_id: str = "usage-chart") -> dict:
    """The chart of `series` (one value per day, oldest first). `empty` when every value is 0:
    the page then says so instead of drawing an axis up to an invented peak."""
    values = [v for _, v in series]
    peak = max(values, default=0)
    total = sum(values)
    chart: dict = {
        "id": chart_id,
        "empty": peak <= 0,
        "total": total,
        "total_shown": metric.format(total),
        "unit": metric.unit,
        "height": HEIGHT,
        "plot_top": PAD_TOP,
        "plot_height": PLOT_HEIGHT,
        "plot_bottom": PAD_TOP + PLOT_HEIGHT,
        "label_y": PAD_TOP + PLOT_HEIGHT + 17,
        "start": long_day(series[0][0]) if series else "",
        "end": long_day(series[-1][0]) if series else "",
    }
    if chart["empty"]:
        return chart
    step = _step(peak, integer=metric.decimals == 0)
    top = math.ceil(peak / step - 1e-9) * step
    step_decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    chart["value_ticks"] = [
        {
            "y": round(PAD_TOP + PLOT_HEIGHT * (1 - i * step / top), 1),
            "label": number(i * step, step_decimals if i else 0),
        }
        for i in range(round(top / step) + 1)
    ]
    count = len(series)
    slot = 100 / count
    gap = slot * (0.25 if count <= 60 else 0.15)
    latest = count - 1
    chart["bars"] = []
    for i, (day, value) in enumerate(series):
        height = PLOT_HEIGHT * value / top
        if value > 0:
            height = max(height, 2)  # a small day stays visible
        tip = f"{long_day(day)}: {metric.describe(value)}"
        chart["bars"].append(
            {
                "slot_x": round(i * slot, 3),
                "slot_w": round(slot, 3),
                "x": round(i * slot + gap / 2, 3),
                "w": round(slot - gap, 3),
                "y": round(PAD_TOP + PLOT_HEIGHT - height, 1),
                "h": round(height, 1),
                "day": day.isoformat(),
                "tip": tip,
                "current": i == latest,  # the one bar in the tab order (arrow keys move between bars)
            }
        )
    every = math.ceil(count / DATE_TICKS)
    chart["date_ticks"] = []
    for i in range(latest, -1, -every):  # counted back from the latest day, which always has its label
        centre = (i + 0.5) * slot
        anchor, x = "middle", centre
        if centre < 3:  # labels may overhang the plot a little (the value axis and the card have room)
            anchor, x = "start", i * slot
        elif centre > 97:
            anchor, x = "end", (i + 1) * slot
        minor = ((latest - i) // every) % 3 != 0
        chart["date_ticks"].append(
            {
                "x": round(x, 3),
                "tick_x": round(centre, 3),
                "anchor": anchor,
                "label": day_label(series[i][0]),
                "minor": minor,
            }
        )
    chart["date_ticks"].reverse()
    busiest_day, busiest = max(series, key=lambda d: d[1])
    chart["busiest"] = f"{long_day(busiest_day)} ({metric.describe(busiest)})"
    return chart
