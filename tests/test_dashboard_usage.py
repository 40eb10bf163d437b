"""The usage and history pages through Django's test client: the usage chart's date and value axes
(thousands separators, an empty state rather than an invented peak), totals, the split by key, CSV
downloads; History lists every request (a cache hit is its own row) with filters and paging,
the job's error, and its audio where some is kept (a stored file, or the audio cache); another
organization's rows and audio are not found."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import UTC, datetime, time, timedelta

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from accounts.models import Organization
from billing.models import UsageEvent
from dashboard.charts import Metric, bar_chart
from synthesis.audio import cache
from synthesis.models import Job
from tests.factories import make_job
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_audio_cache")]


def signup(client, email="ada@example.com", org="Analytical Engines") -> Organization:
    client.post("/dashboard/signup", {"email": email, "password": "correct horse battery", "organization": org})
    return Organization.objects.get(name=org)


def today():
    return timezone.now().astimezone(UTC).date()


def at(day, hour=12):
    return datetime.combine(day, time(hour), tzinfo=UTC)


def event(org, **fields) -> UsageEvent:
    values = {"organization": org, "characters": 10, "model": "chattts", "voice": "alloy", "latency_ms": 250}
    values.update(fields)
    return UsageEvent.objects.create(**values)


def text(response) -> str:
    """The page as a reader gets it: entities decoded."""
    return html.unescape(response.content.decode())


def label(day) -> str:
    return f"{day:%b} {day.day}"


def row_of(page: str, attribute: str) -> str:
    found = re.search(rf"<tr[^>]*{attribute}[^>]*>(.*?)</tr>", page, re.S)
    assert found, f"no row with {attribute}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


def history_rows(page: str) -> list[str]:
    body = re.search(r'<table id="history">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return re.findall(r"<tr data-request=.*?</tr>", body, re.S)


def test_usage_has_a_date_axis_round_values_with_separators_tooltips_and_a_row_per_key(client):
    org = signup(client)
    key, _ = org.create_api_key("backend")
    now = today()
    event(org, api_key=key, characters=12_000, audio_seconds=600.0, created_at=at(now))
    event(org, api_key=key, characters=345, cached=True, created_at=at(now, 13))
    event(org, api_key=key, characters=0, status=UsageEvent.Status.FAILED, created_at=at(now, 14))
    event(org, characters=500, created_at=at(now - timedelta(days=3)))  # the playground: no key
    page = text(client.get("/dashboard/usage"))

    assert 'aria-current="page">Usage</a>' in page
    assert "Characters per day" in page and 'id="usage-empty"' not in page and "peak" not in page
    ticks = re.findall(r'<text x="[\d.]+%" y="\d+" text-anchor="\w+">([A-Z][a-z]{2} \d{1,2})</text>', page)
    assert len(ticks) == 10 and ticks[-1] == label(now) and label(now - timedelta(days=27)) in ticks
    values = re.findall(r'<text x="90%" y="[\d.]+" dy="4" text-anchor="end">([\d,]+)</text>', page)
    assert values == ["0", "5,000", "10,000", "15,000"]  # round steps up past the busiest day
    assert page.count('class="bar"') == 30  # a bar a day, zero days included
    tip = f"{now:%a}, {label(now)}, {now.year}: 12,345 characters"
    assert f'aria-label="{tip}"' in page and f'data-tip="{tip}"' in page and f"<title>{tip}</title>" in page
    assert re.search(r'<svg class="plot"[^>]*role="group"[^>]*aria-labelledby="usage-chart-title"', page)

    assert '<div class="value" id="total-requests">4</div>' in page  # every request, whatever the outcome
    assert '<div class="value" id="total-characters">12,845</div>' in page
    assert '<div class="value" id="total-minutes">10.0</div>' in page
    assert '<div class="value" id="total-cached">1</div>' in page
    keyed = row_of(page, f'data-key="{key.prefix}"')
    assert keyed == f"backend tts_{key.prefix}_… 3 12,345 10.0 1 1"  # requests, characters, minutes, hits, failed
    assert row_of(page, 'data-key="none"') == "Dashboard (no key) — 1 500 0 0 0"
    assert page.index(f'data-key="{key.prefix}"') < page.index('data-key="none"')  # busiest first

    overview = text(client.get("/dashboard/"))
    assert "12,845 characters in 30 days" in overview and "peak" not in overview
    assert f">{label(now)}</text>" in overview and 'href="/dashboard/usage">Usage details</a>' in overview


def test_with_no_usage_the_pages_say_so_instead_of_a_peak_of_one(client):
    signup(client)
    usage = text(client.get("/dashboard/usage"))
    assert '<p class="empty muted" id="usage-empty">No characters billed in this period.</p>' in usage
    assert 'class="bar"' not in usage and "peak" not in usage and 'id="usage-days"' not in usage  # no table of zeros
    assert '<div class="value" id="total-characters">0</div>' in usage
    assert '<td colspan="7" class="muted">No requests in this period.</td>' in usage  # the keys' table
    overview = text(client.get("/dashboard/"))
    assert "No characters billed in the last 30 days." in overview
    assert "peak" not in overview and 'class="bar"' not in overview


def usage_days(page: str) -> list[str]:
    body = re.search(r'<table id="usage-days">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return [row_text(row) for row in re.findall(r"<tr>.*?</tr>", body, re.S)]


def test_a_period_whose_requests_all_failed_names_the_metric_it_lacks_and_keeps_the_table(client):
    org = signup(client)
    now = today()
    for hour in (10, 11):
        event(org, characters=0, status=UsageEvent.Status.FAILED, created_at=at(now, hour))

    page = text(client.get("/dashboard/usage"))
    assert '<div class="value" id="total-requests">2</div>' in page and "requests (2 failed)" in page
    assert '<p class="empty muted" id="usage-empty">No characters billed in this period.</p>' in page
    assert "No usage" not in page and 'class="bar"' not in page
    days = usage_days(page)  # the per-day table still shows the requests the chart has no characters of
    assert len(days) == 30 and days[0] == f"{now:%Y-%m-%d} 2 0 0 0 2" and days[1].endswith(" 0 0 0 0 0")

    requests = text(client.get("/dashboard/usage?metric=requests"))
    assert 'id="usage-empty"' not in requests and requests.count('class="bar"') == 30
    assert f'aria-label="{now:%a}, {label(now)}, {now.year}: 2 requests"' in requests
    audio = text(client.get("/dashboard/usage?metric=audio"))
    assert '<p class="empty muted" id="usage-empty">No audio in this period.</p>' in audio
    assert len(usage_days(audio)) == 30

    overview = text(client.get("/dashboard/"))
    assert (
        "No characters billed in the last 30 days." in overview
        and '<div class="value" id="stat-minutes">0<' in overview
    )


def test_the_period_presets_dates_and_the_metric_switch(client):
    org = signup(client)
    now = today()
    event(org, characters=1_000, audio_seconds=90.0, created_at=at(now))
    event(org, characters=2_000, audio_seconds=30.0, created_at=at(now - timedelta(days=20)))

    week = text(client.get("/dashboard/usage?days=7"))
    assert page_current(week, "Last 7 days") and week.count('class="bar"') == 7
    assert '<div class="value" id="total-characters">1,000</div>' in week  # 20 days ago is outside

    requests = text(client.get("/dashboard/usage?days=90&metric=requests"))
    assert page_current(requests, "Requests") and page_current(requests, "Last 90 days")
    assert "Requests per day" in requests and requests.count('class="bar"') == 90
    assert f'aria-label="{now:%a}, {label(now)}, {now.year}: 1 request"' in requests

    minutes = text(client.get("/dashboard/usage?metric=audio"))
    assert "Audio minutes per day" in minutes and f"{label(now)}, {now.year}: 1.5 audio minutes" in minutes
    switch = re.search(r'<a href="([^"]+)">Requests</a>', minutes).group(1)
    assert "metric=requests" in switch and "days=30" in switch  # the switch keeps the period

    start, end = now - timedelta(days=25), now - timedelta(days=15)
    custom = text(client.get(f"/dashboard/usage?start={start}&end={end}&metric=characters"))
    assert custom.count('class="bar"') == 11 and '<div class="value" id="total-characters">2,000</div>' in custom
    assert not page_current(custom, "Last 30 days")
    assert f"{start:%b} {start.day}, {start.year} – {end:%b} {end.day}, {end.year} (UTC)" in custom

    backwards = text(client.get(f"/dashboard/usage?start={end}&end={start}"))
    assert "The end must not be before the start." in backwards and 'aria-invalid="true"' in backwards
    too_long = text(client.get(f"/dashboard/usage?start={now - timedelta(days=400)}&end={now}"))
    assert "At most 366 days at a time." in too_long


def page_current(page: str, link_text: str) -> bool:
    return re.search(rf'aria-current="true">{link_text}</a>', page) is not None


def test_csv_downloads_per_day_and_per_key(client):
    org = signup(client)
    key, _ = org.create_api_key("=HYPERLINK(evil)")
    now = today()
    event(org, api_key=key, characters=1_234, audio_seconds=12.5, created_at=at(now))
    event(org, api_key=key, characters=0, status=UsageEvent.Status.FAILED, created_at=at(now))
    event(org, characters=40, cached=True, created_at=at(now - timedelta(days=1)))

    page = text(client.get("/dashboard/usage?days=7"))
    by_day_link = re.search(r'<a class="button" href="([^"]+)" download>Download CSV, per day</a>', page).group(1)
    by_day = client.get(by_day_link)
    assert by_day.status_code == 200 and by_day["Content-Type"] == "text/csv; charset=utf-8"
    start = now - timedelta(days=6)
    assert by_day["Content-Disposition"] == (
        f'attachment; filename="analytical-engines-usage-by-day-{start}-to-{now}.csv"'
    )
    rows = list(csv.reader(io.StringIO(by_day.content.decode())))
    assert rows[0] == [
        "date",
        "requests",
        "succeeded",
        "failed",
        "cancelled",
        "cache_hits",
        "characters",
        "audio_seconds",
    ]
    assert len(rows) == 8 and rows[1][0] == start.isoformat()  # every day, zeros included
    assert rows[-1] == [now.isoformat(), "2", "1", "1", "0", "0", "1234", "12.5"]
    assert rows[-2] == [(now - timedelta(days=1)).isoformat(), "1", "1", "0", "0", "1", "40", "0.0"]

    by_key_link = re.search(r'<a class="button" href="([^"]+)" download>Download CSV, per key</a>', page).group(1)
    by_key = client.get(by_key_link)
    assert "usage-by-key" in by_key["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(by_key.content.decode())))
    assert rows[0][:2] == ["key_name", "key_prefix"]
    assert rows[1] == ["'=HYPERLINK(evil)", key.prefix, "2", "1", "1", "0", "0", "1234", "12.5"]  # no formula
    assert rows[2] == ["Dashboard (no key)", "", "1", "1", "0", "0", "1", "40", "0.0"]
    assert client.get("/dashboard/usage.csv?by=voice").status_code == 400


def test_usage_by_model_sums_each_models_ledger_rows_on_the_page_and_in_csv(client):
    org = signup(client)
    now = today()
    event(org, model="kokoro", characters=600, audio_seconds=90.0, created_at=at(now))
    event(org, model="kokoro", characters=150, audio_seconds=30.0, cached=True, created_at=at(now - timedelta(days=2)))
    event(org, model="kokoro", characters=0, status=UsageEvent.Status.FAILED, created_at=at(now))
    event(org, model="chattts", characters=400, audio_seconds=60.0, created_at=at(now))
    event(org, model="kokoro", characters=9_999, created_at=at(now - timedelta(days=10)))  # before the period
    event(org, model="tts-1", characters=20, created_at=at(now))  # a ledger row from before models were engines
    other = Organization.objects.create(name="Globex", slug="globex")
    event(other, model="kokoro", characters=5_000, created_at=at(now))  # another organization's

    page = text(client.get("/dashboard/usage?days=7"))
    assert "<h2>By model</h2>" in page
    assert row_of(page, 'data-model="kokoro"') == "Kokoro-82M kokoro 3 750 2.0 1 1"
    assert row_of(page, 'data-model="chattts"') == "ChatTTS chattts 1 400 1.0 0 0"
    assert row_of(page, 'data-model="tts-1"') == "tts-1 1 20 0 0 0"
    assert page.index('data-model="kokoro"') < page.index('data-model="chattts"')  # most characters first

    link = re.search(r'<a class="button" href="([^"]+)" download>Download CSV, per model</a>', page).group(1)
    assert link == "/dashboard/usage.csv?by=model&days=7"
    by_model = client.get(link)
    start = now - timedelta(days=6)
    assert by_model.status_code == 200 and by_model["Content-Disposition"] == (
        f'attachment; filename="analytical-engines-usage-by-model-{start}-to-{now}.csv"'
    )
    rows = list(csv.reader(io.StringIO(by_model.content.decode())))
    assert rows[0] == [
        "model",
        "model_title",
        "requests",
        "succeeded",
        "failed",
        "cancelled",
        "cache_hits",
        "characters",
        "audio_seconds",
    ]
    assert rows[1:] == [
        ["kokoro", "Kokoro-82M", "3", "2", "1", "0", "1", "750", "120.0"],
        ["chattts", "ChatTTS", "1", "1", "0", "0", "0", "400", "60.0"],
        ["tts-1", "tts-1", "1", "1", "0", "0", "0", "20", "0.0"],
    ]
    month = client.get(f"/dashboard/usage.csv?by=model&start={now - timedelta(days=30)}&end={now}")
    kokoro = next(r for r in csv.reader(io.StringIO(month.content.decode())) if r[0] == "kokoro")
    assert kokoro[7] == str(600 + 150 + 9_999)  # a longer period takes the older row in


def test_history_has_a_model_column_and_filter(client):
    org = signup(client)
    event(org, request_id="req_k", model="kokoro", voice="af_heart")
    event(org, request_id="req_c", model="chattts")
    page = text(client.get("/dashboard/history"))
    assert '<th scope="col">Model</th>' in page and '<option value="kokoro">Kokoro-82M</option>' in page
    rows = history_rows(page)
    kokoro = next(r for r in rows if 'data-request="req_k"' in r)
    assert '<td class="model" data-model="kokoro">Kokoro-82M</td>' in kokoro and "af_heart" in kokoro
    only = history_rows(text(client.get("/dashboard/history?model=kokoro")))
    assert len(only) == 1 and 'data-request="req_k"' in only[0]
    assert '<option value="kokoro" selected>' in text(client.get("/dashboard/history?model=kokoro"))
    refused = text(client.get("/dashboard/history?model=nope"))  # not a model: shown as an error, not applied
    assert "Select a valid choice." in refused and len(history_rows(refused)) == 2


def test_history_lists_every_request_with_cache_hits_as_their_own_rows(client):
    org = signup(client)
    key, _ = org.create_api_key("backend")
    job = make_job(
        org, api_key=key, status=Job.Status.SUCCEEDED, cacheable=False, request_id="req_first", characters=1_234
    )
    event(
        org,
        api_key=key,
        job_id=job.id,
        request_id="req_first",
        characters=1_234,
        audio_seconds=3.21,
        latency_ms=1_500,
        created_at=timezone.now() - timedelta(minutes=3),
    )
    hit_key = f"tts:audio:{org.pk}:v1:hit:def"
    cache.put(hit_key, b"\x01\x00" * 2_400)
    for n in range(2):
        event(
            org,
            api_key=key,
            request_id=f"req_hit{n}",
            characters=1_234,
            cached=True,
            cache_key=hit_key if n else f"tts:audio:{org.pk}:v1:evicted:def",
            latency_ms=12,
            created_at=timezone.now() - timedelta(minutes=2 - n),
        )
    page = text(client.get("/dashboard/history"))
    assert 'aria-current="page">History</a>' in page
    rows = history_rows(page)
    assert [re.search(r'data-request="([^"]*)"', r).group(1) for r in rows] == ["req_hit1", "req_hit0", "req_first"]
    hit = row_text(rows[0])
    assert f"backend tts_{key.prefix}_…" in hit and "1,234" in hit and "12 ms" in hit
    assert '<td class="cached">yes</td>' in rows[0] and '<td class="cached">no</td>' in rows[2]
    newest = UsageEvent.objects.get(request_id="req_hit1")
    assert f'src="/dashboard/history/{newest.pk}/audio"' in rows[0] and "from the audio cache" in hit
    assert "Expired from the audio cache." in row_text(rows[1]) and "<audio" not in rows[1]
    wav = client.get(f"/dashboard/history/{newest.pk}/audio")
    assert wav.status_code == 200 and wav["Content-Type"] == "audio/wav" and wav.content[44:] == b"\x01\x00" * 2_400
    evicted = UsageEvent.objects.get(request_id="req_hit0")
    assert client.get(f"/dashboard/history/{evicted.pk}/audio").status_code == 404
    first = row_text(rows[2])
    assert "succeeded" in first and "1,500 ms" in first and "3.2 s" in first
    assert "Not kept: streamed to the caller (requests without a seed are not stored)." in first
    assert "1–3 of 3 requests" in page


def row_text(row: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()


def test_history_filters_and_pages_keep_the_filters(client):
    org = signup(client)
    key, _ = org.create_api_key("backend")
    other_key, _ = org.create_api_key("batch")
    start = timezone.now() - timedelta(hours=2)
    UsageEvent.objects.bulk_create(
        UsageEvent(
            organization=org,
            api_key=key if n % 2 else other_key,
            request_id=f"req_{n:03d}",
            characters=n,
            model="chattts",
            voice="alloy",
            created_at=start + timedelta(seconds=n),
        )
        for n in range(120)
    )
    event(org, request_id="req_playground", created_at=start - timedelta(days=3))
    event(org, api_key=key, request_id="req_broken", status=UsageEvent.Status.FAILED, characters=0, created_at=start)
    event(org, api_key=key, request_id="req_hit", cached=True, created_at=start)

    first = text(client.get("/dashboard/history"))
    assert len(history_rows(first)) == 50 and "1–50 of 123 requests" in first and "Page 1 of 3" in first
    assert 'data-request="req_119"' in first  # newest first

    filtered = text(client.get(f"/dashboard/history?key={key.prefix}"))
    assert "1–50 of 62 requests" in filtered  # 60 odd ones, the failed one, the cache hit
    next_link = html.unescape(re.search(r'<a href="([^"]+)" rel="next">Next</a>', filtered).group(1))
    assert f"key={key.prefix}" in next_link and "page=2" in next_link
    second = text(client.get(f"/dashboard/history{next_link}"))
    assert len(history_rows(second)) == 12 and "51–62 of 62 requests" in second
    assert all(f"tts_{key.prefix}_" in r for r in history_rows(second))

    failed = history_rows(text(client.get("/dashboard/history?status=failed")))
    assert len(failed) == 1 and 'data-request="req_broken"' in failed[0]
    hits = history_rows(text(client.get("/dashboard/history?cached=yes")))
    assert len(hits) == 1 and 'data-request="req_hit"' in hits[0]
    no_key = history_rows(text(client.get("/dashboard/history?key=none")))
    assert len(no_key) == 1 and "Dashboard (no key)" in no_key[0]
    day = (start - timedelta(days=3)).date()
    dated = history_rows(text(client.get(f"/dashboard/history?start={day}&end={day}")))
    assert [r for r in dated if 'data-request="req_playground"' in r] == dated and len(dated) == 1
    searched = history_rows(text(client.get("/dashboard/history?request_id=req_11")))
    assert len(searched) == 10  # req_110 … req_119
    none = text(client.get("/dashboard/history?request_id=nothing-like-it"))
    assert "No requests match these filters." in none and "Clear filters" in none


def test_history_shows_errors_and_plays_audio_kept_in_a_file_or_the_cache(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    org = signup(client)
    pcm = (np.sin(np.arange(24_000) / 10) * 8000).astype("<i2").tobytes()

    def finished(request_id, **fields):
        job = make_job(org, status=fields.pop("status", Job.Status.SUCCEEDED), request_id=request_id, **fields)
        status = {Job.Status.FAILED: UsageEvent.Status.FAILED}.get(job.status, UsageEvent.Status.SUCCEEDED)
        event(org, job_id=job.id, request_id=request_id, status=status)
        return job

    seeded = finished("req_seeded", cacheable=True, cache_key=f"tts:audio:{org.pk}:v1:abc:def", response_format="mp3")
    cache.put(seeded.cache_key, pcm)
    raw = finished("req_raw", cacheable=True, cache_key=f"tts:audio:{org.pk}:v1:raw:def", response_format="pcm")
    cache.put(raw.cache_key, pcm)
    expired = finished("req_expired", cacheable=True, cache_key=f"tts:audio:{org.pk}:v1:gone:def")
    stored = finished("req_async", interactive=False, response_format="wav")
    stored.result.save(f"{stored.id}.wav", ContentFile(b"RIFF....WAVEfmt fake"), save=True)
    finished("req_failed", status=Job.Status.FAILED, error_code="worker_lost", error_message="The worker was lost.")

    page = text(client.get("/dashboard/history"))
    rows = {re.search(r'data-request="([^"]*)"', r).group(1): r for r in history_rows(page)}
    assert f'<audio controls preload="none" src="/dashboard/jobs/{seeded.id}/audio"' in rows["req_seeded"]
    # Generated (no cache hit), then kept by its seed: said so (before: "Cached: no" beside "from the audio cache").
    assert "from the audio cache, where its seed kept it" in rows["req_seeded"]
    # What was asked and how (before: neither the input nor the kind of request was shown).
    assert '<span class="kind">Live (REST or WebSocket)</span>' in rows["req_seeded"]
    assert "Hello from a test." in rows["req_seeded"]
    assert '<span class="kind">Asynchronous job</span>' in rows["req_async"]
    assert (
        f'src="/dashboard/jobs/{stored.id}/audio"' in rows["req_async"] and "from the stored file" in rows["req_async"]
    )
    assert "<audio" not in rows["req_expired"] and "Expired from the audio cache." in rows["req_expired"]
    assert (
        "<code>worker_lost</code> The worker was lost." in rows["req_failed"]
        and "None: the request failed." in rows["req_failed"]
    )

    mp3 = client.get(f"/dashboard/jobs/{seeded.id}/audio")
    assert mp3.status_code == 200 and mp3["Content-Type"] == "audio/mpeg"
    body = b"".join(mp3.streaming_content) if mp3.streaming else mp3.content
    assert body[:3] == b"ID3" or body[0] == 0xFF  # an MP3 stream
    wav = client.get(f"/dashboard/jobs/{raw.id}/audio")  # raw PCM is played as WAV
    assert wav.status_code == 200 and wav["Content-Type"] == "audio/wav"
    assert wav.content[:4] == b"RIFF" and wav.content[44:] == pcm
    file = client.get(f"/dashboard/jobs/{stored.id}/audio")
    assert file.status_code == 200 and b"".join(file.streaming_content) == b"RIFF....WAVEfmt fake"
    assert client.get(f"/dashboard/jobs/{expired.id}/audio").status_code == 404


def test_another_organizations_rows_and_audio_are_not_found(client):
    other = Organization.objects.create(name="Globex", slug="globex")
    their_key, _ = other.create_api_key("theirs")
    their_job = make_job(other, status=Job.Status.SUCCEEDED, cacheable=True, cache_key=f"tts:audio:{other.pk}:v:x:y")
    cache.put(their_job.cache_key, b"\x01\x00" * 2400)
    event(other, api_key=their_key, job_id=their_job.id, request_id="req_theirs", characters=98_765)
    signup(client)

    page = text(client.get("/dashboard/history"))
    assert "req_theirs" not in page and "theirs" not in page and "No requests yet" in page
    assert client.get(f"/dashboard/jobs/{their_job.id}/audio").status_code == 404
    their_hit = event(other, request_id="req_their_hit", cached=True, cache_key=their_job.cache_key)
    assert client.get(f"/dashboard/history/{their_hit.pk}/audio").status_code == 404
    probe = text(client.get(f"/dashboard/history?key={their_key.prefix}"))
    assert "req_theirs" not in probe and "Select a valid choice." in probe
    usage = text(client.get("/dashboard/usage"))
    assert "No characters billed in this period." in usage and "98,765" not in usage
    assert "98765" not in client.get("/dashboard/usage.csv?by=key").content.decode()


def test_the_jobs_page_is_now_history_and_the_pages_need_a_login(client):
    for path in ("/dashboard/usage", "/dashboard/usage.csv", "/dashboard/history", "/dashboard/jobs"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), path
    signup(client)
    moved = client.get("/dashboard/jobs")
    assert moved.status_code == 302 and moved["Location"] == "/dashboard/history"


def test_the_value_axis_has_round_steps_for_counts_and_minutes():
    day = today()
    counts = bar_chart([(day, 0), (day, 3)], Metric("requests", "request"))
    assert [t["label"] for t in counts["value_ticks"]] == ["0", "1", "2", "3"]  # no half requests
    assert counts["bars"][1]["tip"].endswith(": 3 requests") and counts["bars"][0]["h"] == 0
    big = bar_chart([(day, 1_234_567)], Metric("characters"))
    assert [t["label"] for t in big["value_ticks"]] == ["0", "500,000", "1,000,000", "1,500,000"]
    short = bar_chart([(day, 0.25), (day, 0.001)], Metric("audio minutes", decimals=1))
    assert [t["label"] for t in short["value_ticks"]] == ["0", "0.1", "0.2", "0.3"]
    assert short["bars"][0]["tip"].endswith(": 0.25 audio minutes") and short["bars"][1]["h"] == 2  # still seen
    assert bar_chart([(day, 0)] * 7, Metric("characters"))["empty"]


@pytest.mark.django_db(transaction=True)
def test_history_and_usage_name_the_member_behind_a_preview(live_stack, client):
    """Before: every play and preview made while signed in showed as "Dashboard (no key)"."""
    org = signup(client)
    previewed = client.get("/dashboard/voices/alloy/preview?model=chattts")
    assert previewed.status_code == 200 and previewed["Content-Type"] == "audio/mpeg"
    wait_until(lambda: UsageEvent.objects.filter(organization=org).exists(), 60, "the preview's ledger row")
    event = UsageEvent.objects.get(organization=org)
    assert event.api_key is None and event.member.email == "ada@example.com" and event.characters == 0
    history = html.unescape(client.get("/dashboard/history").content.decode())
    assert "Dashboard: ada@example.com" in history
    assert '<span class="kind">Voice preview (not billed)</span>' in history  # before: a bare 0-character row
    usage = html.unescape(client.get("/dashboard/usage").content.decode())
    members = usage.split('id="usage-members"', 1)[1].split("</table>", 1)[0]
    assert "ada@example.com" in members
