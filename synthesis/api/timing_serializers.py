"""The timings a response carries: each word's (Kokoro) and each SSML mark's, per segment, in SSE
`speech.audio.segment` events and a job's captions."""

from __future__ import annotations

from rest_framework import serializers


class WordTimingSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The word as spoken.")
    start = serializers.FloatField(help_text="Seconds from the start of the audio.")
    end = serializers.FloatField(help_text="Seconds from the start of the audio.")


class SpeechMarkSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The SSML <mark>'s name.")
    time = serializers.FloatField(help_text="Seconds from the start of the audio (breaks counted).")
    approximate = serializers.BooleanField(
        required=False,
        help_text="True inside a sentence on a model without word timings (placed by its characters).",
    )


class CaptionSerializer(serializers.Serializer):
    """A segment's text and when it is spoken, exact from the audio; each word's on models with word
    timings (Kokoro), each SSML mark's."""

    text = serializers.CharField(help_text="The segment's text as sent.")
    start = serializers.FloatField(help_text="Seconds from the start of the audio to the segment's first sample.")
    end = serializers.FloatField(help_text="Seconds to its last sample.")
    words = WordTimingSerializer(
        many=True, required=False, help_text="Kokoro: each word's start and end. Absent on ChatTTS (no alignment)."
    )
    marks = SpeechMarkSerializer(many=True, required=False, help_text="SSML: the segment's <mark>s and their times.")


class SpeechAudioSegmentSerializer(CaptionSerializer):
    """A sentence segment's audio is all out (sent before the next segment's audio): its caption."""

    type = serializers.ChoiceField(choices=["speech.audio.segment"])
