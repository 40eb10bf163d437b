from __future__ import annotations

from django.urls import path

from . import dashboard

app_name = "dashboard"

urlpatterns = [
    path("", dashboard.overview, name="overview"),
    path("signup", dashboard.signup, name="signup"),
    path("switch", dashboard.switch, name="switch"),
    path("keys", dashboard.keys, name="keys"),
    path("keys/<str:prefix>/revoke", dashboard.revoke_key, name="revoke-key"),
    path("voices", dashboard.voices, name="voices"),
    path("jobs", dashboard.jobs, name="jobs"),
    path("jobs/<uuid:job_id>/audio", dashboard.job_audio, name="job-audio"),
    path("docs", dashboard.docs, name="docs"),
    path("members", dashboard.members, name="members"),
    path("members/<int:membership_id>/remove", dashboard.remove_member, name="remove-member"),
    path("invite/<str:token>", dashboard.accept_invitation, name="accept-invitation"),
    path("playground", dashboard.playground, name="playground"),
    path("playground/ticket", dashboard.playground_ticket, name="playground-ticket"),
]
