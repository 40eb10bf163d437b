from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView
from rest_framework.permissions import AllowAny

from synthesis.views import health, operations
from tts_saas.metrics import metrics_view

urlpatterns = [
    path("v1/", include("synthesis.urls")),
    path(
        "v1/openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[AllowAny]),
        name="openapi",
    ),
    path(
        "v1/docs",
        SpectacularRedocView.as_view(url_name="openapi", authentication_classes=[], permission_classes=[AllowAny]),
        name="api-docs",
    ),
    path("healthz", health),
    path("metrics", metrics_view),
    path("ops/", operations, name="operations"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("dashboard/", include("accounts.urls")),
    path("", RedirectView.as_view(pattern_name="dashboard:overview", permanent=False)),
]

handler404 = "tts_saas.errors.not_found"
handler500 = "tts_saas.errors.server_error"
