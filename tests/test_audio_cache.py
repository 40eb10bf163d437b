"""The audio cache in Redis: bounded per entry and in total, oldest evicted first, expiring."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from inference.chattts.params import ChatTTSParams
from synthesis.audio import cache
from synthesis.audio.captions import Caption

pytestmark = pytest.mark.usefixtures("empty_audio_cache")


def key(n: int) -> str:
    return cache.cache_key(1, "v-test", f"text {n}", ChatTTSParams(voice_seed=1, seed=n))


def test_the_key_changes_with_tenant_text_params_and_model_version():
    p = ChatTTSParams(voice_seed=1, seed=1)
    k = cache.cache_key(1, "v1", "hello", p)
    assert k.startswith("tts:audio:1:v1:")
    assert k != cache.cache_key(2, "v1", "hello", p)  # tenants never share entries
    assert k != cache.cache_key(1, "v2", "hello", p)
    assert k != cache.cache_key(1, "v1", "hello!", p)
    assert k != cache.cache_key(1, "v1", "hello", ChatTTSParams(voice_seed=1, seed=1, temperature=0.5))
    assert k != cache.cache_key(1, "v1", "hello", ChatTTSParams(voice_seed=2, seed=1))


HEADER = len(cache.pack(b"", []))  # an entry's captions header when it has none


def test_a_stored_entry_is_found_and_counted(redis_client):
    assert cache.put(key(1), b"\x01\x02" * 100)
    assert async_to_sync(cache.aget)(key(1)) == cache.Entry(b"\x01\x02" * 100, [])
    assert async_to_sync(cache.aget)(key(2)) is None
    stats = cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 1 and stats["bytes"] == 200 + HEADER


def test_an_entry_keeps_its_captions_and_an_entry_stored_before_captions_is_audio_alone(redis_client):
    captions = [Caption("One.", 0.0, 1.25), Caption("Two, 二。", 1.5, 2.0)]
    cache.put(key(1), b"\x00\x01" * 10, captions)
    assert async_to_sync(cache.aget)(key(1)) == cache.Entry(b"\x00\x01" * 10, captions)
    redis_client.set(key(2), b"\x05\x06" * 10)  # the value format before captions were kept
    assert async_to_sync(cache.aget)(key(2)) == cache.Entry(b"\x05\x06" * 10, [])
    assert 0 < redis_client.ttl(key(1)) <= cache.settings.TTS_CACHE_TTL


def test_an_entry_over_the_entry_bound_is_not_stored(settings):
    settings.TTS_CACHE_MAX_ENTRY_BYTES = 100
    assert not cache.put(key(1), b"x" * 101)
    assert async_to_sync(cache.aget)(key(1)) is None


def test_the_total_stays_under_its_bound_evicting_the_oldest(settings, redis_client):
    settings.TTS_CACHE_MAX_BYTES = 1000
    for n in range(10):
        cache.put(key(n), bytes([n]) * 300)
    held = cache.stats()["bytes"]
    assert held <= 1000
    assert redis_client.get(key(9)) == cache.pack(bytes([9]) * 300, [])  # the newest stays
    assert redis_client.get(key(0)) is None  # the oldest went
    assert sum(1 for n in range(10) if redis_client.exists(key(n))) * (300 + HEADER) == held


def test_storing_the_same_key_twice_does_not_double_count():
    cache.put(key(1), b"a" * 50)
    cache.put(key(1), b"b" * 70)
    assert cache.stats()["bytes"] == 70 + HEADER
