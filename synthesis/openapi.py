"""The OpenAPI description of POST /v1/audio/speech (an async Django view, which drf-spectacular
cannot introspect), added to the generated schema by a drf-spectacular postprocessing hook."""

from __future__ import annotations

_ERROR = {"$ref": "#/components/schemas/Error"}

COMPONENTS = {
    "schemas": {
        "Error": {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": {"type": "string", "nullable": True},
                        "code": {"type": "string", "nullable": True},
                    },
                    "required": ["message", "type", "param", "code"],
                }
            },
        },
        "SpeechRequest": {
            "type": "object",
            "required": ["input"],
            "properties": {
                "model": {"type": "string", "default": "chattts", "description": "chattts, or tts-1 etc."},
                "input": {"type": "string", "maxLength": 4096, "description": "Text; inline tags like [laugh]."},
                "voice": {"type": "string", "default": "alloy", "description": "See GET /v1/voices."},
                "response_format": {
                    "type": "string",
                    "enum": ["mp3", "opus", "aac", "flac", "wav", "pcm"],
                    "default": "mp3",
                },
                "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
                "seed": {"type": "integer", "minimum": 0, "description": "Reproducible, cacheable output."},
                "temperature": {"type": "number", "minimum": 0.01, "maximum": 2.0, "default": 0.3},
                "top_p": {"type": "number", "minimum": 0.01, "maximum": 1.0, "default": 0.7},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "refine_text": {"type": "boolean", "default": False},
                "refine_prompt": {"type": "string", "example": "[oral_2][laugh_0][break_4]"},
            },
        },
    }
}

PATHS = {
    "/v1/audio/speech": {
        "post": {
            "operationId": "audio_speech_create",
            "summary": "Text to speech (OpenAI-compatible)",
            "tags": ["audio"],
            "security": [{"ApiKey": []}],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SpeechRequest"}}},
            },
            "responses": {
                "200": {
                    "description": "The audio. Headers: x-cache, x-seed, x-audio-duration, x-request-id.",
                    "content": {
                        t: {"schema": {"type": "string", "format": "binary"}}
                        for t in ("audio/mpeg", "audio/ogg", "audio/aac", "audio/flac", "audio/wav", "audio/pcm")
                    },
                },
                **{
                    str(code): {"description": text, "content": {"application/json": {"schema": _ERROR}}}
                    for code, text in (
                        (400, "Invalid request"),
                        (401, "Missing or bad key"),
                        (403, "Suspended or not in plan"),
                        (429, "Rate limit, concurrency cap or quota"),
                        (503, "No worker or model unavailable"),
                    )
                },
            },
        }
    }
}


def add_speech_endpoint(result, generator, request, public):
    """drf-spectacular postprocessing hook: the speech endpoint and its schemas join the rest."""
    result.setdefault("paths", {}).update(PATHS)
    for section, entries in COMPONENTS.items():
        result.setdefault("components", {}).setdefault(section, {}).update(entries)
    return result
