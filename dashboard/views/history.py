"""History: every request of the organization, one ledger row each (cache hits included; failed
ones are listed but not billed), newest first, filtered (by key, model, outcome, dates, request id)
and paged, with its model, its job's error and its audio where some is kept.

Which audio is kept: an asynchronous job's stored file (until the job is deleted after
TTS_JOB_RETENTION_HOURS); a seeded request's audio in the audio cache (until it expires or is
evicted), which `job_audio` encodes in the job's format; a cache hit's entry (its ledger row keeps
the key), as WAV. Audio of a request without a seed is streamed to its caller and never stored:
the page says why instead of showing a bare dash."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

import redis
from django import forms
from django.conf import settings
from django.core.paginator import Paginator
from django.db.models.functions import Left
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header

from accounts.models import ApiKey
from accounts.tenancy import scoped
from billing import offer
from billing.models import UsageEvent
from inference import registry
from synthesis.api.speech import PREVIEW_TEXT, PREVIEW_TEXTS
from synthesis.audio import cache
from synthesis.audio.formats import encode, output_format, wav_header
from synthesis.models import Job
from voices.models import Voice

from ..access import member_required, page
from ..engines import title_of
from .usage import NO_KEY

PAGE_SIZE = 50
PLAYABLE = ("mp3", "opus", "aac", "flac", "wav")  # codecs a browser's <audio> plays; pcm and G.711 are not
BLOCK = 64 * 1024


class HistoryFilter(forms.Form):
    key = forms.ChoiceField(required=False, label="Key")
    model = forms.ChoiceField(required=False, label="Model")
    status = forms.ChoiceField(required=False, choices=[("", "Any"), *UsageEvent.Status.choices])
    cached = forms.ChoiceField(
        required=False, label="Cache hit", choices=[("", "Any"), ("yes", "Cache hits only"), ("no", "Generated only")]
    )
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    request_id = forms.CharField(required=False, max_length=128, label="Request id contains")

    def __init__(self, *args, organization, **kwargs):
        super().__init__(*args, **kwargs)
        keys = scoped(ApiKey, organization).order_by("name", "prefix")
        self.fields["key"].choices = [
            ("", "Any"),
            ("none", NO_KEY),
            *((k.prefix, f"{k.name} (tts_{k.prefix}_…){' revoked' if k.revoked_at else ''}") for k in keys),
        ]
        self.fields["model"].choices = [("", "Any"), *((spec.name, spec.title) for spec in offer.served())]

    def clean(self):
        data = super().clean()
        if data.get("start") and data.get("end") and data["end"] < data["start"]:
            self.add_error("end", "The end must not be before the start.")
        return data

    def apply(self, events):
        """`events` narrowed by every filter that is valid (a bad one is shown with its error, not applied)."""
        self.is_valid()  # cleaned_data then holds the valid filters only
        data = self.cleaned_data
        if data.get("key") == "none":
            events = events.filter(api_key__isnull=True)
        elif data.get("key"):
            events = events.filter(api_key__prefix=data["key"])
        if data.get("model"):
            events = events.filter(model=data["model"])
        if data.get("status"):
            events = events.filter(status=data["status"])
        if data.get("cached"):
            events = events.filter(cached=data["cached"] == "yes")
        if data.get("start"):
            events = events.filter(created_at__gte=datetime.combine(data["start"], time.min, tzinfo=UTC))
        if data.get("end"):
            events = events.filter(
                created_at__lt=datetime.combine(data["end"] + timedelta(days=1), time.min, tzinfo=UTC)
            )
        if data.get("request_id", "").strip():
            events = events.filter(request_id__icontains=data["request_id"].strip())
        return events


@dataclass(frozen=True)
class RowAudio:
    """A row's audio: where to fetch it, or why there is none."""

    url: str = ""
    playable: bool = True  # else a download (G.711 files: browsers do not play them)
    source: str = ""
    note: str = ""


def kept_for(seconds: int) -> str:
    hours = seconds // 3600
    return f"{hours // 24} days" if hours >= 48 else f"{hours} hours"


def cached_keys(keys: list[str]) -> set[str] | None:
    """Which of the audio cache's `keys` are still there (one round trip); None if Redis is down."""
    try:
        return cache.present(keys)
    except redis.RedisError:
        return None


def row_audio(event: UsageEvent, job: Job | None, in_cache: set[str] | None) -> RowAudio:
    if event.job_id is None:  # cache hits (and an identical request's shared generation) have no job of their own
        if event.cache_key and in_cache is not None and event.cache_key in in_cache:
            return RowAudio(reverse("dashboard:hit-audio", args=[event.pk]), source="audio cache")
        if event.cache_key:
            if in_cache is None:
                return RowAudio(note="The audio cache cannot be reached just now.")
            return RowAudio(note="Expired from the audio cache.")
        if event.cached:  # a shared generation, or a cache hit recorded before hits kept their entry's key
            return RowAudio(note="Not recorded: this row does not say which audio it was served.")
        return RowAudio(note="None: no job is recorded for this request.")
    if job is None:
        return RowAudio(
            note=f"Deleted with its job (jobs are kept {kept_for(settings.TTS_JOB_RETENTION_HOURS * 3600)})."
        )
    if event.status == UsageEvent.Status.FAILED:
        return RowAudio(note="None: the request failed.")
    if event.status == UsageEvent.Status.CANCELLED:
        return RowAudio(note="Not kept: cancelled.")
    if job.zero_retention:  # whatever its seed: neither cached nor stored
        return RowAudio(note="Not kept: zero retention (its audio is neither cached nor stored).")
    # In the order job_audio serves them.
    url = reverse("dashboard:job-audio", args=[job.id])
    spec = output_format(job.response_format)
    if job.result and spec.codec in PLAYABLE:
        return RowAudio(url, source="stored file")
    if job.cache_key and in_cache is not None and job.cache_key in in_cache:  # generated, then kept (a seed)
        return RowAudio(url, source="audio cache, where its seed kept it")
    if job.result:  # raw PCM is played as WAV; G.711 is a download
        return RowAudio(url, playable=spec.codec == "pcm", source="stored file")
    if job.cache_key:
        if in_cache is None:
            return RowAudio(note="The audio cache cannot be reached just now.")
        return RowAudio(note="Expired from the audio cache.")
    if not job.cacheable:
        return RowAudio(note="Not kept: streamed to the caller (requests without a seed are not stored).")
    return RowAudio(note="Not kept: too long for the audio cache.")


PREVIEW_INPUTS = frozenset({PREVIEW_TEXT, *PREVIEW_TEXTS.values()})
TEXT_SHOWN = 160  # characters of a request's input shown in its row
INPUT_READ = 400  # characters of it read (spaces collapse; the preview texts are shorter)


def request_kind(event: UsageEvent, job: Job | None) -> str:
    """What kind of request a row was, in a tenant's words."""
    preview = not event.characters and event.status == UsageEvent.Status.SUCCEEDED and event.member_id
    if job is None:
        if event.cached:
            return "Voice preview, replayed from the cache (not billed)" if preview else "Replayed from the audio cache"
        return "Request"
    if preview and job.input_start in PREVIEW_INPUTS:
        return "Voice preview (not billed)"
    if not job.interactive:
        return "Asynchronous job"
    return "Playground" if event.member_id and not event.api_key_id else "Live (REST or WebSocket)"


def request_text(job: Job | None) -> str:
    """The input as sent, shortened; none where it is not kept."""
    if job is None:
        return ""
    if job.zero_retention:
        return "(text not kept: zero retention)"
    text = " ".join(job.input_start.split())
    return text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 1] + "…"


@member_required
def history(request):
    org = request.principal.organization
    form = HistoryFilter(request.GET or None, organization=org)
    events = scoped(UsageEvent, org).select_related("api_key", "member").order_by("-created_at", "-id")
    if form.is_bound:
        events = form.apply(events)
    page_obj = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = list(page_obj.object_list)
    job_ids = [e.job_id for e in shown if e.job_id]
    jobs = (
        scoped(Job, org)
        .only(
            "id",
            "status",
            "interactive",
            "response_format",
            "result",
            "cache_key",
            "cacheable",
            "zero_retention",
            "error_code",
            "error_message",
        )
        .annotate(input_start=Left("input", INPUT_READ))  # what the row shows, not a long job's whole text
        .in_bulk(job_ids)
    )
    in_cache = cached_keys(
        [j.cache_key for j in jobs.values() if j.cache_key] + [e.cache_key for e in shown if e.cache_key]
    )
    # The organization's own voices by name (a deleted one keeps its id); built-in ids are their names.
    names = dict(scoped(Voice, org).filter(pk__in={e.voice for e in shown}).values_list("pk", "name"))
    rows = []
    for event in shown:
        job = jobs.get(event.job_id) if event.job_id else None
        rows.append(
            {
                "event": event,
                "job": job,
                "key": event.api_key,
                "member": event.member,
                "model": title_of(event.model),
                "voice_name": names.get(event.voice, ""),
                "audio": row_audio(event, job, in_cache),
                "kind": request_kind(event, job),
                "text": request_text(job),
            }
        )
    running = scoped(Job, org).filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
    return page(
        request,
        "history.html",
        "history",
        form=form,
        rows=rows,
        page_obj=page_obj,
        filtered=form.is_bound and any(v for k, v in request.GET.items() if k != "page"),
        running=running.count(),
        no_key=NO_KEY,
        job_retention=kept_for(settings.TTS_JOB_RETENTION_HOURS * 3600),
        cache_ttl=kept_for(settings.TTS_CACHE_TTL),
    )


def cached_pcm(key: str) -> bytes | None:
    if not key:
        return None
    try:
        entry = cache.peek(key)
    except redis.RedisError:
        return None
    return None if entry is None else entry.pcm16


@member_required
def hit_audio(request, event_id: int):
    """A cache hit's audio, as WAV, while the entry it replayed is still cached (the entry's key
    names the organization: another's row is 404 before any lookup)."""
    event = scoped(UsageEvent, request.principal.organization).filter(pk=event_id).exclude(cache_key="").first()
    pcm = cached_pcm(event.cache_key) if event else None
    if pcm is None:
        raise Http404
    return HttpResponse(
        encode(pcm, "wav", registry.sample_rate(event.model)),
        content_type=output_format("wav").content_type,
        headers={"Content-Disposition": content_disposition_header(False, f"request-{event.pk}.wav")},
    )


@member_required
def job_audio(request, job_id):
    """A job's audio for the page's player: its stored file, else its audio-cache entry encoded in
    the job's format (as WAV where the format is raw PCM or G.711, which browsers do not play).
    Another organization's job, or one without audio kept, is 404."""
    job = scoped(Job, request.principal.organization).filter(pk=job_id).first()
    if job is None:
        raise Http404
    spec = output_format(job.response_format)
    playable = spec.codec in PLAYABLE
    try:
        if job.result and playable:
            return FileResponse(
                job.result.open("rb"), content_type=spec.content_type, filename=f"{job.id}.{spec.extension}"
            )
        pcm = cached_pcm(job.cache_key)
        if pcm is not None:
            fmt = job.response_format if playable else f"wav_{spec.sample_rate}"
            out = output_format(fmt)
            return HttpResponse(
                encode(pcm, fmt, registry.sample_rate(job.model)),
                content_type=out.content_type,
                headers={"Content-Disposition": content_disposition_header(False, f"{job.id}.{out.extension}")},
            )
        if job.result and spec.codec == "pcm":
            return pcm_as_wav(job, spec.sample_rate)
        if job.result:  # G.711: a download
            return FileResponse(
                job.result.open("rb"),
                content_type=spec.content_type,
                as_attachment=True,
                filename=f"{job.id}.{spec.extension}",
            )
    except FileNotFoundError:
        pass  # the stored file is gone (deleted with its job meanwhile)
    raise Http404


def pcm_as_wav(job: Job, sample_rate: int) -> StreamingHttpResponse:
    """A stored raw PCM file with a WAV header in front, read a block at a time."""
    size = job.result.size
    source = job.result.open("rb")

    def body():
        yield wav_header(size // 2, sample_rate)
        with source:
            while block := source.read(BLOCK):
                yield block

    response = StreamingHttpResponse(body(), content_type=output_format(f"wav_{sample_rate}").content_type)
    response["Content-Length"] = str(44 + size)
    response["Content-Disposition"] = content_disposition_header(False, f"{job.id}.wav")
    return response
