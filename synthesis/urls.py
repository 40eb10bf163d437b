from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("audio/speech", views.speech, name="speech"),
    path("voices", views.voices, name="voices"),
]
