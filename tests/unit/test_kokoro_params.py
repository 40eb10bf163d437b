"""Kokoro's row parameters as the web makes them and as the worker reads them back from a job."""

from __future__ import annotations

import json
from dataclasses import asdict

from inference.kokoro.params import KokoroParams, accent


def test_parameters_read_back_from_a_jobs_json_are_the_same_hashable_parameters():
    made = KokoroParams.from_request({"speed": 1.5}, {"mix": [["af_heart", 3], ["bm_george", 1]]}, seed=9)
    assert made.voice == (("af_heart", 0.75), ("bm_george", 0.25))
    read = KokoroParams(**json.loads(json.dumps(asdict(made))))  # a job's params, through JSON
    assert read == made and hash(read) == hash(made)


def test_the_seed_is_not_a_parameter_and_a_builtin_voice_is_a_mix_of_one():
    one = KokoroParams.from_request({}, {"builtin": "bf_emma"}, seed=1)
    other = KokoroParams.from_request({}, {"builtin": "bf_emma"}, seed=2)
    assert one == other and one.voice == (("bf_emma", 1.0),) and one.english == "en-gb"


def test_the_accent_follows_the_heaviest_english_voice_of_a_mix():
    assert accent((("zf_xiaobei", 0.6), ("bm_george", 0.4))) == "en-gb"
    assert accent((("bm_george", 0.3), ("af_heart", 0.7))) == "en-us"
    assert accent((("zf_xiaobei", 1.0),)) == "en-us"
