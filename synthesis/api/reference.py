"""The API reference as a reader meets it (/v1/docs): every operation titled in words (not its
machine id), grouped under named tags in the order a developer needs them, speech first and the
compatibility endpoints last; the schema's own URL left out; its description linking the guides
(GUIDES), which the dashboard serves. A drf-spectacular post-processing hook (SPECTACULAR_SETTINGS),
so the schema the fuzzer reads is the one the reference shows."""

from __future__ import annotations

from django.urls import reverse

# The guides in docs/ that the dashboard serves to its users, each at /dashboard/docs/<name> from
# docs/<name>.md (dashboard.views.docs; a fixed list, never a path from a request): its title (the
# file's first heading) and what it is for. Here, so that the reference links them too.
GUIDES = {
    "api": (
        "API (v1)",
        "the speech request, the models compared, formats, headers, captions, errors and error codes, jobs, webhooks",
    ),
    "keys-and-limits": (
        "Keys, plans, quotas and usage",
        "making a key, scopes, client tokens, plans, rate and concurrency limits, usage",
    ),
    "voices": (
        "Voices and pronunciation",
        "built-in voices, your own voices (seeds, recordings, designs), pronunciation lexicons",
    ),
    "elevenlabs": (
        "ElevenLabs' wire",
        "the elevenlabs SDK and the voice-agent frameworks' ElevenLabs services here: routes, what maps to what",
    ),
    "security": ("Security", "single sign-on, second factors, IP allowlists, the audit log, zero retention"),
    "billing": ("Billing", "plans sold through Stripe: what a tenant sees, how usage is metered"),
    "licences": ("Licences and commercial use", "what each model's licence allows, and this service's own licence"),
    "dashboard": ("The dashboard", "what each page of the dashboard does"),
}

# Tags in the reference's order, with what each holds.
TAGS = {
    "Speech": "Text to speech: one request (OpenAI-compatible), or a WebSocket ticket for streaming.",
    "Voices": "Built-in voices, the organization's own voices, and previews.",
    "Jobs": "Long texts as asynchronous jobs: their audio, captions and live stream.",
    "Lexicons": "Pronunciation lexicons applied to requests.",
    "Models": "The models this deployment serves, each with its licence.",
    "Usage and billing": "Usage reports and the subscription.",
    "API keys": "Keys, their scopes and limits.",
    "Client tokens": "Short-lived tokens for browsers and phones.",
    "Webhooks": "The signing secret and the organization's event endpoint.",
    "Organization": "Settings: IP allowlist, data retention, single sign-on, second factors.",
    "Audit log": "What was done in the organization, by whom.",
    "ElevenLabs": "ElevenLabs' REST wire under /elevenlabs/ (its SDK, Pipecat's and LiveKit's ElevenLabs services): "
    "its shapes and errors, xi-api-key or Bearer; its text-streaming WebSockets are in the ElevenLabs guide.",
    "Compatibility": "The shapes other clients read (Open WebUI); a key is optional here.",
}
# Each operation's tag and title, by operationId (None: the summary its view sets).
OPERATIONS = {
    "audio_speech_create": ("Speech", "Create speech"),
    "audio_stream_tickets_create": ("Speech", "Get a WebSocket ticket"),
    "voices_retrieve": ("Voices", "List a model's built-in voices"),
    "audio_voices_create": ("Voices", "Create a voice"),
    "audio_voice_retrieve": ("Voices", "Get a voice"),
    "audio_voice_destroy": ("Voices", "Delete a voice"),
    "audio_voices_preview_retrieve": ("Voices", None),
    "jobs_create": ("Jobs", "Create a job"),
    "jobs_list": ("Jobs", "List jobs"),
    "jobs_retrieve": ("Jobs", "Get a job"),
    "jobs_audio_retrieve": ("Jobs", "Download a job's audio"),
    "jobs_captions_retrieve": ("Jobs", "Get a job's captions"),
    "jobs_stream_retrieve": ("Jobs", None),
    "jobs_cancel_create": ("Jobs", "Cancel a job"),
    "lexicons_create": ("Lexicons", "Create a lexicon"),
    "lexicons_list": ("Lexicons", "List lexicons"),
    "lexicons_retrieve": ("Lexicons", "Get a lexicon"),
    "lexicons_partial_update": ("Lexicons", "Change a lexicon"),
    "lexicons_destroy": ("Lexicons", "Delete a lexicon"),
    "models_list": ("Models", "List models"),
    "models_retrieve": ("Models", "Get a model"),
    "usage_list": ("Usage and billing", "Get usage"),
    "subscription_retrieve": ("Usage and billing", "Get the subscription"),
    "keys_create": ("API keys", "Create an API key"),
    "keys_list": ("API keys", "List API keys"),
    "keys_retrieve": ("API keys", "Get an API key"),
    "tokens_create": ("Client tokens", None),
    "audit_logs_list": ("Audit log", None),
    "audio_models_retrieve": ("Compatibility", "List models (Open WebUI)"),
    "audio_voices_list": ("Compatibility", "List voices (Open WebUI)"),
}
PREFIXES = {"keys_": "API keys", "webhooks_": "Webhooks", "organization_": "Organization", "elevenlabs_": "ElevenLabs"}
LEFT_OUT = ("/v1/openapi.json",)  # the schema itself: not an operation a client calls


def _tag_of(operation_id: str) -> str:
    if operation_id in OPERATIONS:
        return OPERATIONS[operation_id][0]
    for prefix, tag in PREFIXES.items():
        if operation_id.startswith(prefix):
            return tag
    raise KeyError(f"{operation_id} has no place in the API reference: add it to synthesis/api/reference.py")


def guides_in_words() -> str:
    """The description's list of the guides, and the dashboard's WebSocket protocol and SSML guide."""
    docs = reverse("dashboard:docs")
    lines = [
        f"- [{title}]({reverse('dashboard:guide', args=[name])}): {what}" for name, (title, what) in GUIDES.items()
    ]
    lines += [
        f"- [WebSocket streaming protocol]({docs}#websocket): audio as it is generated, text streamed in",
        f"- [SSML]({docs}#ssml): pauses, say-as, pronunciations, prosody and speech marks, per model",
    ]
    return "Guides (on the dashboard, signed in):\n\n" + "\n".join(lines)


def arrange(result, generator, request, public):
    result["info"]["description"] = f"{result['info'].get('description', '')}\n\n{guides_in_words()}".lstrip()
    for path in LEFT_OUT:
        result["paths"].pop(path, None)
    placed: dict[str, list] = {tag: [] for tag in TAGS}
    for path, operations in result["paths"].items():
        for method, operation in operations.items():
            operation_id = operation["operationId"]
            tag = _tag_of(operation_id)
            title = OPERATIONS.get(operation_id, (tag, None))[1]
            if title:
                operation["summary"] = title
            operation["tags"] = [tag]
            if tag == "Compatibility":
                operation["security"] = []  # a key is optional: said in the tag and the description
            placed[tag].append((path, method))
    result["tags"] = [{"name": name, "description": text} for name, text in TAGS.items()]
    # Paths in the tags' order, so that each tag's operations come in the order listed above.
    order = {op_id: i for i, op_id in enumerate(OPERATIONS)}
    first = {}
    for tag_index, tag in enumerate(TAGS):
        for path, method in placed[tag]:
            rank = order.get(result["paths"][path][method]["operationId"], len(order))
            first[path] = min(first.get(path, (tag_index, rank)), (tag_index, rank))
    result["paths"] = dict(sorted(result["paths"].items(), key=lambda item: first[item[0]]))
    return result
