from __future__ import annotations

from django.urls import path, re_path

from .views import account, billing, docs, jobs, keys, overview, playground, team

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("signup", account.signup, name="signup"),
    path("switch", account.switch, name="switch"),
    path("invite/<str:token>", account.accept_invitation, name="accept-invitation"),
    path("keys", keys.keys, name="keys"),
    re_path(r"^keys/(?P<prefix>[A-Za-z0-9]{12})/revoke$", keys.revoke_key, name="revoke-key"),  # else 404
    path("members", team.members, name="members"),
    path("members/<int:membership_id>/remove", team.remove_member, name="remove-member"),
    path("invitations/<int:invitation_id>/revoke", team.revoke_invitation, name="revoke-invitation"),
    path("voices", playground.voices, name="voices"),
    path("playground", playground.playground, name="playground"),
    path("playground/ticket", playground.playground_ticket, name="playground-ticket"),
    path("jobs", jobs.jobs, name="jobs"),
    path("jobs/<uuid:job_id>/audio", jobs.job_audio, name="job-audio"),
    path("docs", docs.docs, name="docs"),
    path("billing/", billing.billing, name="billing"),
    path("billing/checkout", billing.checkout, name="billing-checkout"),
    path("billing/portal", billing.portal, name="billing-portal"),
    path("billing/spending-limit", billing.spending_limit, name="billing-spending-limit"),
]
