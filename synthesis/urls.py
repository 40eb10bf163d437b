from __future__ import annotations

from django.urls import path

from accounts.views import ApiKeyViewSet
from billing.views import UsageViewSet, subscription

from . import views

urlpatterns = [
    path("audio/speech", views.speech, name="speech"),
    path("voices", views.voices, name="voices"),
    path("keys", ApiKeyViewSet.as_view({"get": "list", "post": "create"}), name="keys"),
    path("keys/<str:key_id>", ApiKeyViewSet.as_view({"get": "retrieve", "delete": "destroy"}), name="key"),
    path("usage", UsageViewSet.as_view({"get": "list"}), name="usage"),
    path("subscription", subscription, name="subscription"),
]
