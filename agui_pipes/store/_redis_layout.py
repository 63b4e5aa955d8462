"""How a run lies in Redis: the Lua scripts that write it atomically, and reading it back.

The key layout is described in ``redis.py``'s docstring. Each script is one
round trip and atomic, so two processes can never interleave a run's seqs;
``APPEND`` (and so ``CREATE``) first checks the database's epoch is the
writer's (KEYS[9], ARGV[11]): after Redis restarted empty a live run's hash is
gone, and an append must not silently create it again from seq 1;
the append script's reply codes and the run hash's fields are decoded here,
next to the scripts that write them.
"""

from __future__ import annotations

from typing import Any

from .._foundation.principal import DEFAULT_SCOPE
from ._errors import RunBroken, RunEnded, ThreadTaken, WrongThread
from ._records import RunStatus, StoredRun

__all__ = [
    "APPEND",
    "BROKEN",
    "CREATE",
    "END",
    "LEASE_RELEASE",
    "LEASE_RENEW",
    "EpochChanged",
    "appended",
    "run_record",
    "text",
]

APPEND = """
local epoch = redis.call('GET', KEYS[9])
if epoch ~= ARGV[11] then return {-5, epoch or ''} end
local status = redis.call('HGET', KEYS[1], 'status')
local last = 0
local created = 0
if not status then
  local owner = redis.call('HGET', KEYS[6], 'scope')
  if owner and owner ~= ARGV[8] then return {-4, owner} end
  local order = redis.call('INCR', KEYS[5])
  if not owner then
    redis.call('HSET', KEYS[6], 'scope', ARGV[8], 'created', ARGV[3], 'order', order)
    redis.call('ZADD', KEYS[7], order, ARGV[1])
  end
  if ARGV[8] ~= ARGV[9] then redis.call('SADD', KEYS[8], ARGV[8]) end
  redis.call('HSET', KEYS[1], 'thread', ARGV[1], 'status', 'live', 'created', ARGV[3],
             'updated', ARGV[3], 'last_seq', 0, 'order', order)
  if ARGV[10] and ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'digest', ARGV[10]) end
  redis.call('ZADD', KEYS[3], order, ARGV[2])
  redis.call('ZADD', KEYS[4], order, ARGV[2])
  created = 1
else
  if status == 'broken' then
    return {-1, redis.call('HGET', KEYS[1], 'reason') or ''}
  end
  local thread = redis.call('HGET', KEYS[1], 'thread')
  if thread ~= ARGV[1] then return {-2, thread} end
  if status ~= 'live' then return {-3, status} end
  last = tonumber(redis.call('HGET', KEYS[1], 'last_seq'))
end
local n = tonumber(ARGV[5])
if n > 0 then
  redis.call('XADD', KEYS[2], '0-' .. (last + n), 'f', last + 1, 'd', ARGV[6], 'l', ARGV[7])
  redis.call('HSET', KEYS[1], 'last_seq', last + n, 'updated', ARGV[3])
end
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
  redis.call('EXPIRE', KEYS[6], ttl)
end
return {last + 1, created}
"""

CREATE = (
    """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
"""
    + APPEND
)
"""``create_run``: the append script's creation of an empty run, only if the run's hash does
not exist (the compare-and-set), with the request's digest (ARGV[10]) in the hash."""

LEASE_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
"""Extend a thread lease only if it is still the run's (KEYS[1] the lease, ARGV[1] the run
id, ARGV[2] the TTL in ms)."""

LEASE_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Delete a thread lease only if it is still the run's."""

END = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return nil end
if status == 'live' then
  redis.call('HSET', KEYS[1], 'status', ARGV[1], 'ended', ARGV[2], 'updated', ARGV[2])
  if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'reason', ARGV[3]) end
  redis.call('XADD', KEYS[2], '1-*', 'end', ARGV[1])
  local ttl = tonumber(ARGV[5])
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[1], ttl)
    redis.call('EXPIRE', KEYS[2], ttl)
  end
end
return redis.call('HGETALL', KEYS[1])
"""

BROKEN = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'thread', '', 'created', ARGV[2], 'last_seq', 0, 'order', 0)
end
redis.call('HSET', KEYS[1], 'status', 'broken', 'reason', ARGV[1], 'ended', ARGV[2],
           'updated', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('XADD', KEYS[2], '1-*', 'end', 'broken')
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return 1
"""


class EpochChanged(Exception):
    """``APPEND`` refused: the database's epoch is not this store's (Redis restarted empty
    or was flushed, so every run this store wrote before is gone). ``stored`` is the
    epoch Redis holds now, ``None`` if none."""

    def __init__(self, stored: str | None) -> None:
        self.stored = stored
        super().__init__(f"the event log's epoch is now {stored!r}")


def appended(reply: Any, run_id: str, thread_id: str) -> tuple[int, bool]:
    """The first seq ``APPEND`` gave and whether it created the run; or what it refused."""
    code, detail = reply
    if code == -5:
        raise EpochChanged(text(detail) or None)
    if code == -1:
        raise RunBroken(run_id, text(detail) or "a write failed")
    if code == -2:
        raise WrongThread(f"run {run_id!r} belongs to thread {text(detail)!r}, not {thread_id!r}")
    if code == -4:
        raise ThreadTaken(thread_id)
    if code == -3:
        raise RunEnded(f"run {run_id!r} ended ({text(detail)}); its log takes no more events")
    return int(code), detail == 1


def text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


def run_record(
    run_id: str, fields: dict[bytes, bytes], scope: str = DEFAULT_SCOPE
) -> StoredRun | None:
    if not fields or b"status" not in fields:
        return None
    ended = fields.get(b"ended")
    return StoredRun(
        thread_id=fields.get(b"thread", b"").decode(),
        run_id=run_id,
        status=RunStatus(fields[b"status"].decode()),
        created=float(fields.get(b"created", b"0")),
        updated=float(fields.get(b"updated", fields.get(b"created", b"0"))),
        ended=None if ended is None else float(ended),
        last_seq=int(fields.get(b"last_seq", b"0")),
        reason=text(fields.get(b"reason")),
        scope=scope,
    )
