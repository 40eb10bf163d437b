"""Each organization's share of the light worker's delivery work: at most TTS_WEBHOOK_ORG_SLOTS (1)
of one organization's webhook attempts (job callbacks and endpoint events) run at once, whatever it has
queued. An attempt may take ATTEMPT_SECONDS (a receiver that never answers), and the `default`
queue, its worker and beat are every tenant's: without a share, one organization with its limit of
failing endpoints and a flood of events held every thread for minutes while others' callbacks
waited behind it. A delivery whose organization holds its slots goes back on the queue after a
short wait without using an attempt (the caller re-publishes it); the next organization's runs.

A slot is a member of a Redis sorted set scored by when it was taken: one left by a killed worker
lapses after SLOT_SECONDS (longer than any attempt)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from tts_saas.redis import get_redis

from .callbacks import ATTEMPT_SECONDS

SLOT_SECONDS = 3 * ATTEMPT_SECONDS
KEY = "tts:delivering:{}"
# Drop lapsed slots, then take one if fewer than ARGV[3] are held (1: taken, 0: the share is full).
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[4]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[4])))
  return 1
end
return 0
"""


@contextmanager
def slot(org_id: int | None) -> Iterator[bool]:
    """Yields whether this attempt may run now (True: a slot of `org_id` is held until the block
    ends); an organization-less delivery always runs."""
    slots = settings.TTS_WEBHOOK_ORG_SLOTS
    if org_id is None or slots <= 0:
        yield True
        return
    r, key, token = get_redis(), KEY.format(org_id), uuid.uuid4().hex
    taken = bool(r.eval(_TAKE, 1, key, time.time(), token, slots, SLOT_SECONDS))
    try:
        yield taken
    finally:
        if taken:
            r.zrem(key, token)
