"""Caption documents (synthesis.audio.captions): SRT and WebVTT timestamps and numbering, cue text kept on
one line and escaped where WebVTT needs it, segments without audio left out of the cues."""

from __future__ import annotations

from synthesis.audio.captions import Caption, render, srt, vtt

CUES = [
    Caption("First line.", 0.0, 1.2345),
    Caption("Nothing said.", 1.5, 1.5),  # a segment that produced no audio
    Caption("Fish & <chips>\nnext --> line.", 3661.5, 3662.001),
]


def test_srt_numbers_cues_with_comma_milliseconds():
    assert srt(CUES) == (
        "1\n00:00:00,000 --> 00:00:01,234\nFirst line.\n"
        "\n"
        "2\n01:01:01,500 --> 01:01:02,001\nFish & <chips> next -> line.\n"
    )


def test_vtt_has_its_header_dot_milliseconds_and_escapes():
    assert vtt(CUES) == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:01.234\nFirst line.\n"
        "\n"
        "01:01:01.500 --> 01:01:02.001\nFish &amp; &lt;chips&gt; next -&gt; line.\n"
    )


def test_json_keeps_every_segment():
    assert render(CUES, "json") == {"segments": [c.as_dict() for c in CUES]}
    assert Caption.from_dict(CUES[0].as_dict()) == CUES[0]


def test_cues_leave_out_inline_control_tags():
    assert srt([Caption("Hello [laugh] there [uv_break] friend.", 0.0, 1.0)]).split("\n")[2] == "Hello there friend."
