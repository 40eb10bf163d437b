"""ASGI entry point (uvicorn or daphne). WebSocket routes join here with Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")

application = get_asgi_application()


def _preload_text_normalisers() -> None:
    # WeTextProcessing's grammars take ~2 s to load: do it at start, not on the first request.
    import threading

    from inference.text import preload

    threading.Thread(target=preload, name="preload-normalisers", daemon=True).start()


if os.environ.get("TTS_PRELOAD_TEXT", "1") == "1":
    _preload_text_normalisers()
