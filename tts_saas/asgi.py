"""ASGI entry point (uvicorn or daphne): HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")

django_application = get_asgi_application()  # sets Django up before the consumers are imported

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from synthesis.api.routing import websocket_urlpatterns  # noqa: E402
from tts_saas.limits import HttpBodyLimits, WebSocketHeaderLimits  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": HttpBodyLimits(django_application),
        "websocket": WebSocketHeaderLimits(URLRouter(websocket_urlpatterns)),
    }
)
