from __future__ import annotations

from django.urls import path

from synthesis.api.consumers import SpeechStreamConsumer

websocket_urlpatterns = [path("v1/audio/stream", SpeechStreamConsumer.as_asgi())]
