"""drf-spectacular's settings: the OpenAPI schema (/v1/openapi.json) and its reference (/v1/docs)."""

SPECTACULAR_SETTINGS = {
    "TITLE": "tts_saas API",
    "DESCRIPTION": "Multi-tenant text-to-speech on Kokoro-82M and VoxCPM2 (Apache-2.0: their audio may be sold) and "
    "ChatTTS (non-commercial weights, CC BY-NC 4.0), chosen per request with `model` (GET /v1/models lists what this "
    "deployment serves, each with its licence); /v1/audio/speech is OpenAI-compatible, and /elevenlabs/v1/ speaks "
    "ElevenLabs' wire. Kokoro's captions carry word timings. The guides below are also in the repository's docs/.",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",  # JSON Schema: it can say that an event's `data` holds JSON (contentSchema)
    "COMPONENT_SPLIT_REQUEST": True,  # request bodies apart: what a request must hold (non-blank strings) said
    "SCHEMA_PATH_PREFIX": "/v1",  # operation ids without it; ElevenLabs' routes keep theirs (elevenlabs_v1_…)
    "PREPROCESSING_HOOKS": ["synthesis.api.openapi.add_stand_ins"],
    "ENUM_NAME_OVERRIDES": {
        "ListObjectEnum": ["list"],
        "JobObjectEnum": ["job"],
        "TextNormalizationEnum": ["auto", "on", "off"],  # /v1's text_normalization, ElevenLabs' apply_…
        "AudioFormatEnum": "synthesis.audio.formats.ALL_FORMATS",
        "ApiKeyKindEnum": [("standard", "Standard"), ("admin", "Admin"), ("restricted", "Restricted")],
        "KeyPresetEnum": ["standard", "admin"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "synthesis.api.openapi.frame_event_streams",
        "synthesis.api.openapi.add_common_errors",
        "synthesis.api.reference.arrange",  # titles, tags and their order in /v1/docs
    ],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No web fonts are loaded (templates/drf_spectacular/redoc.html): the system's, as the dashboard.
    "REDOC_UI_SETTINGS": {
        "theme": {
            "typography": {
                "fontFamily": 'system-ui, -apple-system, "Segoe UI", sans-serif',
                "headings": {"fontFamily": 'system-ui, -apple-system, "Segoe UI", sans-serif'},
                "code": {"fontFamily": "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"},
            }
        }
    },
}
