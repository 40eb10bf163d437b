from __future__ import annotations

from django.urls import path, re_path

from .views import (
    account,
    audit,
    billing,
    docs,
    history,
    jobs,
    keys,
    lexicons,
    organization,
    overview,
    playground,
    profile,
    security,
    staff,
    team,
    usage,
    voices,
    webhooks,
)

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("signup", account.signup, name="signup"),
    path("switch", account.switch, name="switch"),
    path("invite/<str:token>", account.accept_invitation, name="accept-invitation"),
    path("keys", keys.keys, name="keys"),
    re_path(r"^keys/(?P<prefix>[A-Za-z0-9]{12})/revoke$", keys.revoke_key, name="revoke-key"),  # else 404
    re_path(r"^keys/(?P<prefix>[A-Za-z0-9]{12})/change$", keys.change_key, name="change-key"),
    path("members", team.members, name="members"),
    path("members/<int:membership_id>/remove", team.remove_member, name="remove-member"),
    path("invitations/<int:invitation_id>/revoke", team.revoke_invitation, name="revoke-invitation"),
    path("invitations/<int:invitation_id>/resend", team.resend_invitation, name="resend-invitation"),
    path("members/<int:membership_id>/role", team.change_role, name="change-role"),
    path("voices", voices.voices, name="voices"),
    re_path(r"^voices/(?P<voice_id>voice_[0-9a-f]{16})/delete$", voices.delete_voice, name="delete-voice"),
    re_path(
        r"^voices/(?P<voice_id>voice_[0-9a-f]{16}|[a-z]+(?:_[a-z]+)?)/preview$",
        voices.voice_preview,
        name="voice-preview",
    ),
    path("lexicons", lexicons.lexicons, name="lexicons"),
    re_path(r"^lexicons/(?P<lexicon_id>lex_[0-9a-f]{16})$", lexicons.lexicon, name="lexicon"),
    re_path(r"^lexicons/(?P<lexicon_id>lex_[0-9a-f]{16})/delete$", lexicons.delete_lexicon, name="delete-lexicon"),
    path("playground", playground.playground, name="playground"),
    path("playground/ticket", playground.playground_ticket, name="playground-ticket"),
    path("playground/encode", playground.playground_encode, name="playground-encode"),
    path("usage", usage.usage, name="usage"),
    path("usage.csv", usage.usage_csv, name="usage-csv"),
    path("history", history.history, name="history"),
    path("jobs", jobs.jobs, name="jobs"),  # now History
    path("jobs/<uuid:job_id>/audio", history.job_audio, name="job-audio"),
    path("history/<int:event_id>/audio", history.hit_audio, name="hit-audio"),
    path("webhooks", webhooks.webhooks, name="webhooks"),
    path("webhooks/test", webhooks.send_test, name="webhook-test"),
    path("webhooks/jobs/<uuid:job_id>/redeliver", webhooks.redeliver, name="webhook-redeliver"),
    path("security", security.security, name="security"),
    path("account", profile.account_page, name="account"),
    path("staff", staff.staff, name="staff"),
    path("organization", organization.organization, name="organization"),
    path("audit", audit.audit_log, name="audit"),
    path("audit.csv", audit.audit_csv, name="audit-csv"),
    path("docs", docs.docs, name="docs"),
    path("billing/", billing.billing, name="billing"),
    path("billing/checkout", billing.checkout, name="billing-checkout"),
    path("billing/portal", billing.portal, name="billing-portal"),
    path("billing/spending-limit", billing.spending_limit, name="billing-spending-limit"),
]
