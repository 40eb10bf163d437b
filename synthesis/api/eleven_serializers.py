"""ElevenLabs' shapes as serializers: the text-to-speech body (`synthesis.api.elevenlabs` checks each
request with it, so what /v1/openapi.json documents is what is refused) and the responses the
schema documents (`eleven_openapi`); `eleven_shapes` makes the bodies themselves."""

from __future__ import annotations

from rest_framework import serializers

NO_SUCH_CONTROL = "Accepted and named in the x-ignored-settings header: no model here has this control."


class VoiceSettingsSerializer(serializers.Serializer):
    stability = serializers.FloatField(required=False, allow_null=True, help_text=NO_SUCH_CONTROL)
    similarity_boost = serializers.FloatField(required=False, allow_null=True, help_text=NO_SUCH_CONTROL)
    style = serializers.FloatField(required=False, allow_null=True, help_text=NO_SUCH_CONTROL)
    use_speaker_boost = serializers.BooleanField(required=False, allow_null=True, help_text=NO_SUCH_CONTROL)
    speed = serializers.FloatField(required=False, allow_null=True, help_text="Speaking speed, 0.25 to 4 (1: as is).")


class LocatorSerializer(serializers.Serializer):
    pronunciation_dictionary_id = serializers.CharField(help_text="A lexicon of this service (GET /v1/lexicons).")
    version_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, help_text="Not used.")


def _said(help_text: str) -> dict:
    return {"required": False, "allow_null": True, "allow_blank": True, "help_text": help_text}


class ElevenLabsSpeechSerializer(serializers.Serializer):
    """`POST /elevenlabs/v1/text-to-speech/{voice_id}` (and its stream and timestamp routes)."""

    text = serializers.CharField(trim_whitespace=False, help_text="The text to speak (the plan's input limit).")
    model_id = serializers.CharField(
        **_said(
            "A model of this service (kokoro, chattts, voxcpm: GET /elevenlabs/v1/models); ElevenLabs' own names "
            "(eleven_…) or none: the voice's model."
        )
    )
    voice_settings = VoiceSettingsSerializer(required=False, allow_null=True)
    seed = serializers.IntegerField(
        required=False, allow_null=True, help_text="The same seed, text and voice: the same audio."
    )
    language_code = serializers.CharField(**_said("Accepted and named in x-ignored-settings: the voice's language."))
    apply_text_normalization = serializers.ChoiceField(
        choices=["auto", "on", "off"],
        required=False,
        help_text="auto and on: numbers, dates and units read out as words (this service's rules); off: the text "
        "as written, its digits left to the model, on every model (text_normalization).",
    )
    apply_language_text_normalization = serializers.BooleanField(required=False, help_text="Not used.")
    pronunciation_dictionary_locators = serializers.ListField(
        child=LocatorSerializer(), required=False, allow_null=True, max_length=3
    )
    previous_text = serializers.CharField(**_said("Accepted and named in x-ignored-settings (no model continues it)."))
    next_text = serializers.CharField(**_said("Accepted and named in x-ignored-settings."))
    previous_request_ids = serializers.ListField(
        child=serializers.CharField(), required=False, allow_null=True, help_text="Accepted; not used."
    )
    next_request_ids = serializers.ListField(
        child=serializers.CharField(), required=False, allow_null=True, help_text="Accepted; not used."
    )
    use_pvc_as_ivc = serializers.BooleanField(required=False, help_text="Not used.")
    audio_effects = serializers.JSONField(required=False, allow_null=True, help_text="Accepted; named, not applied.")


# --- responses, as the schema documents them ---


class ElevenLabsErrorDetailSerializer(serializers.Serializer):
    status = serializers.CharField(help_text="A stable machine-readable reason (invalid_api_key, quota_exceeded…).")
    message = serializers.CharField()


class ElevenLabsErrorSerializer(serializers.Serializer):
    """ElevenLabs' error body."""

    detail = ElevenLabsErrorDetailSerializer()


class AlignmentSerializer(serializers.Serializer):
    characters = serializers.ListField(child=serializers.CharField())
    character_start_times_seconds = serializers.ListField(child=serializers.FloatField())
    character_end_times_seconds = serializers.ListField(child=serializers.FloatField())


class AudioWithTimestampsSerializer(serializers.Serializer):
    audio_base64 = serializers.CharField(help_text="The audio (or this line's piece of it), base64.")
    alignment = AlignmentSerializer(allow_null=True, help_text="Each character and its start and end in seconds.")
    normalized_alignment = AlignmentSerializer(allow_null=True, help_text="The same characters (as spoken).")


class LanguageSerializer(serializers.Serializer):
    language = serializers.CharField()
    model_id = serializers.CharField()


class ElevenLabsVoiceSerializer(serializers.Serializer):
    voice_id = serializers.CharField()
    name = serializers.CharField()
    category = serializers.ChoiceField(choices=["premade", "cloned", "generated"])
    description = serializers.CharField(allow_blank=True)
    labels = serializers.DictField(child=serializers.CharField())
    preview_url = serializers.CharField(help_text="This service's preview route (the key's organization).")
    available_for_tiers = serializers.ListField(child=serializers.CharField())
    settings = serializers.DictField(allow_null=True)
    high_quality_base_model_ids = serializers.ListField(child=serializers.CharField())
    verified_languages = serializers.ListField(child=LanguageSerializer())


class ElevenLabsVoicesSerializer(serializers.Serializer):
    voices = ElevenLabsVoiceSerializer(many=True)


class ElevenLabsVoicesPageSerializer(ElevenLabsVoicesSerializer):
    has_more = serializers.BooleanField()
    total_count = serializers.IntegerField()
    next_page_token = serializers.CharField(allow_null=True)


class ModelLanguageSerializer(serializers.Serializer):
    language_id = serializers.CharField()
    name = serializers.CharField()


class ElevenLabsModelSerializer(serializers.Serializer):
    model_id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField(help_text="What the model does, and its licence.")
    can_be_finetuned = serializers.BooleanField()
    can_do_text_to_speech = serializers.BooleanField()
    can_do_voice_conversion = serializers.BooleanField()
    can_use_style = serializers.BooleanField()
    can_use_speaker_boost = serializers.BooleanField()
    serves_pro_voices = serializers.BooleanField()
    token_cost_factor = serializers.FloatField(help_text="The plan's weight: characters billed per character.")
    requires_alpha_access = serializers.BooleanField()
    max_characters_request_free_user = serializers.IntegerField(allow_null=True)
    max_characters_request_subscribed_user = serializers.IntegerField(allow_null=True)
    maximum_text_length_per_request = serializers.IntegerField(allow_null=True)
    languages = serializers.ListField(child=ModelLanguageSerializer())
    concurrency_group = serializers.CharField()


class AmountSerializer(serializers.Serializer):
    amount = serializers.CharField()
    currency = serializers.CharField()


class ElevenLabsSubscriptionSerializer(serializers.Serializer):
    tier = serializers.CharField(help_text="The plan.")
    character_count = serializers.IntegerField(help_text="Characters used this month.")
    character_limit = serializers.IntegerField(help_text="Characters included this month.")
    max_character_limit_extension = serializers.IntegerField(allow_null=True)
    max_credit_limit_extension = serializers.IntegerField()
    can_extend_character_limit = serializers.BooleanField(help_text="The plan sells characters beyond the limit.")
    allowed_to_extend_character_limit = serializers.BooleanField()
    next_character_count_reset_unix = serializers.IntegerField()
    voice_slots_used = serializers.IntegerField(help_text="The organization's own voices.")
    professional_voice_slots_used = serializers.IntegerField()
    professional_voice_slots_used_in_workspace = serializers.IntegerField()
    voice_limit = serializers.IntegerField()
    max_voice_add_edits = serializers.IntegerField(allow_null=True)
    voice_add_edit_counter = serializers.IntegerField()
    professional_voice_limit = serializers.IntegerField()
    can_extend_voice_limit = serializers.BooleanField()
    can_use_instant_voice_cloning = serializers.BooleanField()
    can_use_professional_voice_cloning = serializers.BooleanField()
    currency = serializers.CharField()
    status = serializers.CharField()
    billing_period = serializers.CharField()
    character_refresh_period = serializers.CharField()
    current_overage = AmountSerializer()
    open_invoices = serializers.ListField(child=serializers.DictField())
    has_open_invoices = serializers.BooleanField()


class ElevenLabsUserSerializer(serializers.Serializer):
    user_id = serializers.CharField(help_text="The key's organization.")
    workspace_id = serializers.CharField()
    first_name = serializers.CharField(help_text="The organization's name.")
    subscription = ElevenLabsSubscriptionSerializer()
    is_new_user = serializers.BooleanField()
    xi_api_key = serializers.CharField(allow_null=True, help_text="Never the key (always null).")
    can_use_delayed_payment_methods = serializers.BooleanField()
    is_onboarding_completed = serializers.BooleanField()
    is_onboarding_checklist_completed = serializers.BooleanField()
    created_at = serializers.IntegerField()
    seat_type = serializers.CharField()
