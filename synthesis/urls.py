from __future__ import annotations

from django.urls import path

from accounts.views import ApiKeyViewSet
from billing.views import UsageViewSet, subscription

from . import views

jobs = views.JobViewSet

urlpatterns = [
    path("audio/speech", views.speech, name="speech"),
    path("audio/stream/tickets", views.stream_ticket, name="stream-ticket"),
    path("voices", views.voices, name="voices"),
    path("jobs", jobs.as_view({"get": "list", "post": "create"}), name="jobs"),
    path("jobs/<uuid:job_id>", jobs.as_view({"get": "retrieve"}), name="job"),
    path("jobs/<uuid:job_id>/audio", jobs.as_view({"get": "audio"}), name="job-audio"),
    path("jobs/<uuid:job_id>/cancel", jobs.as_view({"post": "cancel"}), name="job-cancel"),
    path("jobs/<uuid:job_id>/stream", views.job_stream, name="job-stream"),
    path("keys", ApiKeyViewSet.as_view({"get": "list", "post": "create"}), name="keys"),
    path("keys/<str:key_id>", ApiKeyViewSet.as_view({"get": "retrieve", "delete": "destroy"}), name="key"),
    path("usage", UsageViewSet.as_view({"get": "list"}), name="usage"),
    path("subscription", subscription, name="subscription"),
]
