"""Usage: a period's characters, requests or audio minutes per day (a chart with its table), the
period's totals, a breakdown per model and per API key, and each as a CSV download. Everything is
read from the ledger: per day and per key through billing.usage.usage_report, as /v1/usage reads
it; per model with the same totals, grouped by the ledger's `model` (the engine that spoke); days
are UTC."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse, HttpResponseBadRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header

from accounts.models import ApiKey
from accounts.tenancy import scoped
from billing.models import UsageEvent
from billing.usage import REPORT_TOTALS, usage_report

from ..access import member_required, page
from ..charts import Metric, bar_chart, days_between, minutes, number
from ..engines import title_of

PRESETS = (7, 30, 90)  # "last N days", today included
DEFAULT_DAYS = 30
MAX_DAYS = 366  # as /v1/usage allows
NO_KEY = "Dashboard (no key)"


@dataclass(frozen=True)
class Shown:
    """One metric of the chart: its switch's label, its unit, the value of a report row, and what
    the page says when the period has none of it (failed requests bill no characters)."""

    label: str
    metric: Metric
    field: str
    none: str
    scale: float = 1.0

    def value(self, row: dict) -> float:
        return row[self.field] / self.scale


METRICS = {
    "characters": Shown(
        "Characters", Metric("characters", "character"), "characters", "No characters billed in this period."
    ),
    "requests": Shown("Requests", Metric("requests", "request"), "all_requests", "No requests in this period."),
    "audio": Shown(
        "Audio minutes", Metric("audio minutes", decimals=1), "audio_seconds", "No audio in this period.", 60.0
    ),
}


def today() -> date:
    return timezone.now().astimezone(UTC).date()


class PeriodForm(forms.Form):
    start = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end:
            if end < start:
                self.add_error("end", "The end must not be before the start.")
            elif (end - start).days + 1 > MAX_DAYS:
                self.add_error("end", f"At most {MAX_DAYS} days at a time.")
            elif end >= date.max:
                self.add_error("end", "Choose an earlier end.")
        return data


@dataclass(frozen=True)
class Period:
    start: date
    end: date
    preset: int | None  # the "last N days" it is, if it is one

    @property
    def query(self) -> dict[str, str]:
        """The URL parameters that choose this period again."""
        if self.preset:
            return {"days": str(self.preset)}
        return {"start": self.start.isoformat(), "end": self.end.isoformat()}


def last_days(days: int) -> Period:
    end = today()
    return Period(end - timedelta(days=days - 1), end, days)


def chosen_period(params) -> tuple[Period, PeriodForm]:
    """From/to dates when given (checked by the form; a bad pair falls back to the default with
    the form's errors shown), else one of the presets, else the last 30 days."""
    if params.get("start") or params.get("end"):
        form = PeriodForm(params)
        if form.is_valid():
            return Period(form.cleaned_data["start"], form.cleaned_data["end"], None), form
        return last_days(DEFAULT_DAYS), form
    days = params.get("days", "")
    period = last_days(int(days) if days.isdigit() and int(days) in PRESETS else DEFAULT_DAYS)
    return period, PeriodForm(initial={"start": period.start, "end": period.end})


def report(org, period: Period, group_by: str) -> dict:
    return usage_report(scoped(UsageEvent, org), period.start, period.end, group_by, totals=REPORT_TOTALS)


def zero_row() -> dict:
    return {name: 0 for name in REPORT_TOTALS} | {"audio_seconds": 0.0}


def per_day(org, period: Period) -> tuple[list[tuple[date, dict]], dict]:
    """Every day of the period with its totals (days without usage as zeros), and the period's totals."""
    got = report(org, period, "day")
    by_day = {row["date"]: row for row in got["data"]}
    return [(day, by_day.get(day.isoformat(), zero_row())) for day in days_between(period.start, period.end)], got[
        "total"
    ]


def per_key(org, period: Period) -> list[dict]:
    """The period's totals per key, busiest first; requests made without a key in one row."""
    rows = report(org, period, "key")["data"]
    revoked = set(
        scoped(ApiKey, org)
        .filter(prefix__in=[r["key_id"] for r in rows if r["key_id"]], revoked_at__isnull=False)
        .values_list("prefix", flat=True)
    )
    for row in rows:
        row["revoked"] = row["key_id"] in revoked
    return sorted(rows, key=lambda r: (-r["characters"], -r["all_requests"], r["key_id"] or ""))


def per_member(org, period: Period) -> list[dict]:
    """The period's requests made without a key (playground, previews), per member, busiest first."""
    rows = report(org, period, "member")["data"]
    return sorted(rows, key=lambda r: (-r["characters"], -r["all_requests"], r["member"] or ""))


def per_model(org, period: Period) -> list[dict]:
    """The period's totals per model (the ledger's engine name), most characters first."""
    since = datetime.combine(period.start, time.min, tzinfo=UTC)
    until = datetime.combine(period.end + timedelta(days=1), time.min, tzinfo=UTC)
    events = scoped(UsageEvent, org).filter(created_at__gte=since, created_at__lt=until)
    rows = [
        {**row, "characters": row["characters"] or 0, "audio_seconds": round(row["audio_seconds"] or 0.0, 3)}
        for row in events.values("model").annotate(**REPORT_TOTALS).order_by("model")
    ]
    return sorted(rows, key=lambda r: (-r["characters"], -r["all_requests"], r["model"]))


def shown_row(row: dict) -> dict:
    """A report row as the page shows it: thousands separators, audio in minutes (the CSV has the
    succeeded and cancelled counts too)."""
    return {
        "requests": number(row["all_requests"]),
        "failed": number(row["failed_requests"]),
        "cached": number(row["cached_requests"]),
        "characters": number(row["characters"]),
        "minutes": minutes(row["audio_seconds"]),
    }


def link(name: str, **params: str) -> str:
    return f"{reverse(name)}?{urlencode(params)}"


@member_required
def usage(request):
    org = request.principal.organization
    period, form = chosen_period(request.GET)
    metric = request.GET.get("metric", "")
    metric = metric if metric in METRICS else "characters"
    shown = METRICS[metric]
    days, total = per_day(org, period)
    chart = bar_chart([(day, shown.value(row)) for day, row in days], shown.metric)
    keys = per_key(org, period)
    models = per_model(org, period)
    return page(
        request,
        "usage.html",
        "usage",
        period=period,
        form=form,
        presets=[
            {
                "label": f"Last {n} days",
                "url": link("dashboard:usage", days=str(n), metric=metric),
                "current": period.preset == n,
            }
            for n in PRESETS
        ],
        metrics=[
            {"label": m.label, "url": link("dashboard:usage", metric=name, **period.query), "current": name == metric}
            for name, m in METRICS.items()
        ],
        metric=metric,
        chart=chart,
        chart_title=f"{shown.label} per day",
        chart_none=shown.none,
        any_requests=total["all_requests"] > 0,  # the per-day table then, even if the chart is empty
        total=shown_row(total),
        hit_rate=f"{100 * total['cached_requests'] / total['all_requests']:.1f}" if total["all_requests"] else None,
        days=[(day, shown_row(row)) for day, row in reversed(days)],
        keys=[
            {"name": row["key_name"] or NO_KEY, "prefix": row["key_id"], "revoked": row["revoked"], **shown_row(row)}
            for row in keys
        ],
        models=[{"name": row["model"], "title": title_of(row["model"]), **shown_row(row)} for row in models],
        members=[
            {"email": row["member"] or "a member no longer here", **shown_row(row)} for row in per_member(org, period)
        ],
        no_key=NO_KEY,
        csv_by_day=link("dashboard:usage-csv", by="day", **period.query),
        csv_by_key=link("dashboard:usage-csv", by="key", **period.query),
        csv_by_model=link("dashboard:usage-csv", by="model", **period.query),
    )


CSV_COLUMNS = ["requests", "succeeded", "failed", "cancelled", "cache_hits", "characters", "audio_seconds"]


def csv_values(row: dict) -> list:
    return [
        row["all_requests"],
        row["requests"],
        row["failed_requests"],
        row["cancelled_requests"],
        row["cached_requests"],
        row["characters"],
        round(row["audio_seconds"], 3),
    ]


def cell(text: str) -> str:
    """A name as a CSV cell that spreadsheets do not run as a formula."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@member_required
def usage_csv(request):
    """The period per day (every day, zeros included), per key or per model, as a CSV download."""
    org = request.principal.organization
    by = request.GET.get("by", "day")
    period, form = chosen_period(request.GET)
    if by not in ("day", "key", "model") or form.errors:
        return HttpResponseBadRequest(
            "Choose by=day, by=key or by=model and a valid period (start and end, at most 366 days)."
        )
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"{org.slug}-usage-by-{by}-{period.start.isoformat()}-to-{period.end.isoformat()}.csv"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    out = csv.writer(response)
    if by == "day":
        days, _ = per_day(org, period)
        out.writerow(["date", *CSV_COLUMNS])
        out.writerows([day.isoformat(), *csv_values(row)] for day, row in days)
    elif by == "model":
        out.writerow(["model", "model_title", *CSV_COLUMNS])
        out.writerows(
            [cell(row["model"]), cell(title_of(row["model"])), *csv_values(row)] for row in per_model(org, period)
        )
    else:
        out.writerow(["key_name", "key_prefix", *CSV_COLUMNS])
        out.writerows(
            [cell(row["key_name"] or NO_KEY), row["key_id"] or "", *csv_values(row)] for row in per_key(org, period)
        )
    return response
