"""Every route, composed here: the /v1 API from the apps' views, the dashboard, staff pages."""

from __future__ import annotations

from importlib import import_module

from allauth.account.decorators import secure_admin_login
from allauth.account.views import reauthenticate
from allauth.socialaccount import views as social_views
from django.contrib import admin
from django.contrib.auth.views import LogoutView, PasswordChangeView
from django.urls import URLResolver, include, path, re_path
from django.views.decorators.cache import never_cache
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView
from rest_framework.permissions import AllowAny

from accounts.identity_views import RequireMfaViewSet, SsoConnectionViewSet
from accounts.origin_views import BrowserOriginsViewSet
from accounts.views import (
    ApiKeyViewSet,
    AuditLogViewSet,
    ClientTokenViewSet,
    DataRetentionViewSet,
    IpAllowlistViewSet,
    WebhookSecretViewSet,
)
from billing.views import UsageViewSet, stripe_webhook, subscription
from dashboard.views.account import password_reset, password_reset_done, sign_in
from dashboard.views.operations import operations
from dashboard.views.sso import provider_callback, provider_login, sso_start, sso_unfinished
from synthesis.api import discovery, eleven_discovery, elevenlabs, jobs, speech, webhook_endpoints, webhooks
from synthesis.api.aliases import VoiceAliasesViewSet
from synthesis.api.defaults import SpeechDefaultsViewSet
from tts_saas.metrics import metrics_view
from tts_saas.views import health, icon
from voices import api as voices_api
from voices.lexicons import LexiconViewSet

job = jobs.JobViewSet
lexicons = LexiconViewSet
# Staff sign in through the dashboard's sign-in (throttled, with their second factor); the admin
# console's own form would log them in without it.
staff_sign_in = secure_admin_login(admin.site.login)

v1 = [
    path("audio/speech", speech.speech, name="speech"),
    path("audio/stream/tickets", speech.stream_ticket, name="stream-ticket"),
    path("voices", discovery.voices, name="voices"),
    path("audio/voices", voices_api.audio_voices, name="audio-voices"),
    path("audio/voices/<str:voice_id>", voices_api.audio_voice, name="audio-voice"),
    path("audio/voices/<str:voice_id>/preview", speech.voice_preview, name="audio-voice-preview"),
    path("audio/models", discovery.audio_models, name="audio-models"),
    path("models", discovery.models, name="models"),
    path("models/<str:model_id>", discovery.model, name="model"),
    path("jobs", job.as_view({"get": "list", "post": "create"}), name="jobs"),
    path("jobs/<uuid:job_id>", job.as_view({"get": "retrieve"}), name="job"),
    path("jobs/<uuid:job_id>/audio", job.as_view({"get": "audio"}), name="job-audio"),
    path("jobs/<uuid:job_id>/captions", job.as_view({"get": "captions"}), name="job-captions"),
    path("jobs/<uuid:job_id>/cancel", job.as_view({"post": "cancel"}), name="job-cancel"),
    path("jobs/<uuid:job_id>/stream", jobs.job_stream, name="job-stream"),
    path("lexicons", lexicons.as_view({"get": "list", "post": "create"}), name="lexicons"),
    path(
        "lexicons/<str:lexicon_id>",
        lexicons.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="lexicon",
    ),
    path("keys", ApiKeyViewSet.as_view({"get": "list", "post": "create"}), name="keys"),
    path(
        "keys/<str:key_id>",
        ApiKeyViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="key",
    ),
    path("keys/<str:key_id>/rotate", ApiKeyViewSet.as_view({"post": "rotate"}), name="key-rotate"),
    path(
        "webhooks/endpoint",
        webhooks.WebhookEndpointViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="webhook-endpoint",
    ),
    path("webhooks/secret", WebhookSecretViewSet.as_view({"get": "retrieve"}), name="webhook-secret"),
    path(
        "webhooks/endpoints",
        webhook_endpoints.WebhookEndpointViewSet.as_view({"get": "list", "post": "create"}),
        name="webhook-endpoints",
    ),
    path(
        "webhooks/endpoints/<str:endpoint_id>",
        webhook_endpoints.WebhookEndpointViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
        ),
        name="webhook-endpoint-item",
    ),
    path(
        "webhooks/endpoints/<str:endpoint_id>/rotate_secret",
        webhook_endpoints.WebhookEndpointViewSet.as_view({"post": "rotate"}),
        name="webhook-endpoint-rotate",
    ),
    path(
        "webhooks/endpoints/<str:endpoint_id>/test",
        webhook_endpoints.WebhookEndpointViewSet.as_view({"post": "test"}),
        name="webhook-endpoint-test",
    ),
    path(
        "webhooks/endpoints/<str:endpoint_id>/deliveries",
        webhook_endpoints.WebhookEndpointViewSet.as_view({"get": "deliveries"}),
        name="webhook-endpoint-deliveries",
    ),
    path(
        "webhooks/deliveries/<str:delivery_id>",
        webhook_endpoints.WebhookDeliveryViewSet.as_view({"get": "retrieve"}),
        name="webhook-delivery",
    ),
    path(
        "webhooks/deliveries/<str:delivery_id>/redeliver",
        webhook_endpoints.WebhookDeliveryViewSet.as_view({"post": "redeliver"}),
        name="webhook-delivery-redeliver",
    ),
    path("webhooks/secret/rotate", WebhookSecretViewSet.as_view({"post": "rotate"}), name="webhook-secret-rotate"),
    path(
        "organization/data_retention",
        DataRetentionViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="data-retention",
    ),
    path(
        "organization/ip_allowlist",
        IpAllowlistViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="ip-allowlist",
    ),
    path(
        "organization/sso",
        SsoConnectionViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="sso",
    ),
    path("organization/sso/verify_domain", SsoConnectionViewSet.as_view({"post": "verify_domain"}), name="sso-verify"),
    path("organization/mfa", RequireMfaViewSet.as_view({"get": "retrieve", "put": "update"}), name="require-mfa"),
    path(
        "organization/speech_defaults",
        SpeechDefaultsViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="speech-defaults",
    ),
    path(
        "organization/voice_aliases",
        VoiceAliasesViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="voice-aliases",
    ),
    path(
        "organization/browser_origins",
        BrowserOriginsViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="browser-origins",
    ),
    path("tokens", ClientTokenViewSet.as_view({"post": "create"}), name="tokens"),
    path("audit_logs", AuditLogViewSet.as_view({"get": "list"}), name="audit-logs"),
    path("usage", UsageViewSet.as_view({"get": "list"}), name="usage"),
    path("subscription", subscription, name="subscription"),
    path(
        "openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[AllowAny]),
        name="openapi",
    ),
    path(
        "docs",
        SpectacularRedocView.as_view(url_name="openapi", authentication_classes=[], permission_classes=[AllowAny]),
        name="api-docs",
    ),
]

# ElevenLabs' wire (synthesis.api.elevenlabs): its SDK's paths under /elevenlabs/, the same keys and policy.
eleven = [
    path("v1/text-to-speech/<str:voice_id>", elevenlabs.text_to_speech, name="el-tts"),
    path("v1/text-to-speech/<str:voice_id>/stream", elevenlabs.text_to_speech, name="el-tts"),
    path("v1/text-to-speech/<str:voice_id>/with-timestamps", elevenlabs.with_timestamps, name="el-tts"),
    path("v1/text-to-speech/<str:voice_id>/stream/with-timestamps", elevenlabs.stream_with_timestamps, name="el-tts"),
    path("v1/voices", eleven_discovery.voices, name="el-voices"),
    path("v2/voices", eleven_discovery.voices_page, name="el-voices"),
    path("v1/voices/<str:voice_id>", eleven_discovery.voice, name="el-voice"),
    path("v1/models", eleven_discovery.models, name="el-models"),
    path("v1/user", eleven_discovery.user, name="el-user"),
    path("v1/user/subscription", eleven_discovery.user_subscription, name="el-subscription"),
    re_path(r"^.*$", elevenlabs.not_found),
]


def never_cached(patterns: list) -> list:
    """`patterns` (an included URL module's), every page never cached, however deep: the second
    factors' pages show a TOTP secret and recovery codes, which no cache or back button may keep."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            never_cached(pattern.url_patterns)
        else:
            pattern.callback = never_cache(pattern.callback)
    return patterns


# Single sign-on and second factors (django-allauth; only these of its pages are mounted). allauth's
# pages name the sign-in and sign-out by its own URL names: they are the dashboard's.
identity = [
    path("login/", sign_in, name="account_login"),
    path("logout/", LogoutView.as_view(), name="account_logout"),
    path("password_change/", PasswordChangeView.as_view(), name="account_change_password"),
    path("reauthenticate/", reauthenticate, name="account_reauthenticate"),
    path("sso/", sso_start, name="sso-start"),
    path("sso/<str:provider_id>/login/", provider_login, name="openid_connect_login"),
    path("sso/<str:provider_id>/login/callback/", provider_callback, name="openid_connect_callback"),
    path("2fa/", include(never_cached(import_module("allauth.mfa.urls").urlpatterns))),
    # Of allauth's social pages only where a provider's refusal or a cancel lands (no connections page:
    # a provider identity is tied to an account by the organization's own sign-in, nowhere else).
    path("social/login/cancelled/", social_views.login_cancelled, name="socialaccount_login_cancelled"),
    path("social/login/error/", social_views.login_error, name="socialaccount_login_error"),
    path("social/signup/", sso_unfinished, name="socialaccount_signup"),
    path("sessions/", include("allauth.usersessions.urls")),
]

urlpatterns = [
    path("v1/", include(v1)),
    path("elevenlabs/", include(eleven)),
    path("healthz", health),
    path("favicon.ico", icon),
    path("favicon.svg", icon, name="icon"),
    path("billing/stripe/webhook", stripe_webhook, name="stripe-webhook"),
    path("metrics", metrics_view),
    path("ops/", operations, name="operations"),
    path("admin/login/", staff_sign_in),  # the dashboard's sign-in, then back
    path("admin/", admin.site.urls),
    path("accounts/login/", sign_in, name="login"),  # throttled; the rest are Django's own
    path("accounts/password_reset/", password_reset, name="password_reset"),
    path("accounts/password_reset/done/", password_reset_done, name="password_reset_done"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("accounts/", include(identity)),
    path("dashboard/", include("dashboard.urls")),
    path("", RedirectView.as_view(pattern_name="dashboard:overview", permanent=False)),
]

handler403 = "dashboard.views.errors.forbidden"
handler404 = "dashboard.views.errors.not_found"
handler500 = "dashboard.views.errors.server_error"
