"""The Redis log's claims: run creation as one Lua compare-and-set, thread leases as
`SET key runId NX PX ttl`, renewed and released by scripts that check the value.
"""

from __future__ import annotations

from ._base import DEFAULT_SCOPE
from ._errors import StoreUnavailable
from ._redis_connection import RedisConnection
from ._redis_layout import EpochChanged, appended, text

__all__ = ["RedisClaims"]


class RedisClaims(RedisConnection):
    """Run creation and thread leases for ``RedisEventLog`` (module doc)."""

    async def _create(self, scope: str, thread_id: str, run_id: str, digest: str | None) -> bool:
        now = self._now()
        keys = self._run_keys(thread_id, run_id, scope)
        for attempt in (1, 2):
            args: list[str | int | bytes] = [thread_id, run_id, repr(now), self._ttl, 0, b"", b""]
            args.extend((scope, DEFAULT_SCOPE, digest or "", self.epoch))
            reply = await self._io(self._scripts["create"](keys=keys, args=args))
            try:
                _, created = appended(reply, run_id, thread_id)
                break
            except EpochChanged as changed:
                # Redis restarted empty (or another process already took the
                # new epoch): a run not created yet can start in the new one.
                await self._epoch_changed(changed)
                if attempt == 2:
                    raise StoreUnavailable(
                        "the event log was reset twice while creating the run; retry"
                    ) from None
        if created:
            self._writing[scope, run_id] = self.epoch
        if created and self._sweep_due(now):
            await self.prune(now)
        return created

    async def _acquire(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> str | None:
        client = self._redis()
        key = self._key("lease:", thread_id, scope)
        while True:
            if await self._io(client.set(key, run_id, nx=True, px=ttl_ms)):
                return None
            holder = text(await self._io(client.get(key)))
            if holder == run_id:
                await self._renew(scope, thread_id, run_id, ttl_ms)
                return None
            if holder is not None:
                return holder

    async def _renew(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> bool:
        key = self._key("lease:", thread_id, scope)
        renewed = await self._io(self._scripts["lease_renew"](keys=[key], args=[run_id, ttl_ms]))
        return bool(renewed)

    async def _release(self, scope: str, thread_id: str, run_id: str) -> None:
        key = self._key("lease:", thread_id, scope)
        await self._io(self._scripts["lease_release"](keys=[key], args=[run_id]))

    def _run_keys(self, thread_id: str, run_id: str, scope: str) -> list[str]:
        return [
            self._key("run:", run_id, scope),
            self._key("events:", run_id, scope),
            self._key("thread:", thread_id, scope),
            self._key("runs", "", scope),
            self._key("order"),
            self._key("owner:", thread_id),
            self._key("threads", "", scope),
            self._key("scopes"),
            self._key("epoch"),
        ]

    async def _epoch_changed(self, changed: EpochChanged) -> None:
        if changed.stored is None:
            await self._reset_epoch()
        else:
            self._adopt_epoch(changed.stored)
