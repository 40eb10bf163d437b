from __future__ import annotations

from django.urls import path

from synthesis.api.consumers import SpeechStreamConsumer
from synthesis.api.eleven_socket import ElevenLabsMultiSocket, ElevenLabsSocket

ELEVEN = "elevenlabs/v1/text-to-speech/<str:voice_id>"
websocket_urlpatterns = [
    path("v1/audio/stream", SpeechStreamConsumer.as_asgi()),
    path(f"{ELEVEN}/stream-input", ElevenLabsSocket.as_asgi()),
    path(f"{ELEVEN}/multi-stream-input", ElevenLabsMultiSocket.as_asgi()),
]
