"""Warm requests: a chat with max_tokens 0, the draft the user is still typing, prefilled into its
conversation's slot so that Send reads only what changed. They hold no capacity and never wait in
the queue, so no real request ever waits behind one."""

from __future__ import annotations

from desktop.gateway.intake import EventIntake
from desktop.gateway.mirror import Duplex
from desktop.gateway.pool import Pool
from desktop.gateway.request import Request, Status
from desktop.protocol import Done, TokenStats


class Warms:
    """Sends each warm straight to the worker that caches its conversation, else to one with an
    empty slot, else nowhere (it ends at once, "cancelled": a warm never evicts). There it runs at
    the lowest priority and steps aside for any real request (workers/scheduler.py). A newer warm
    of the same conversation (the same history hash) stops the older one. Shares the gateway's
    live requests by id; `intake` sends the commands and ends the requests."""

    def __init__(self, pool: Pool, requests: dict[str, Request], intake: EventIntake) -> None:
        self._pool, self._requests, self._intake = pool, requests, intake

    def send(self, req: Request) -> None:
        req.warm = True
        for older in [r for r in self._requests.values() if r.warm and r.history == req.history]:
            if older.status is Status.RUNNING:  # superseded: its worker ends it, keeping its KV
                self._intake.stop(older)
        worker_id = self.target(req.history)
        if worker_id is None:
            done = Done(req.request_id, stats=TokenStats(finish_reason="cancelled"))
            req.events.put_nowait(done)
            req.done.set_result(done)
            return
        req.worker_id, req.status = worker_id, Status.RUNNING
        self._requests[req.request_id] = req
        self._intake.submit(worker_id, req.cmd)

    def target(self, history: bytes) -> str | None:
        """A worker that is up and in no live call, whose slots hold this history, else one with
        an empty slot (None: none; the warm is skipped)."""
        ups = [w for w in self._pool.workers.values() if w.up and w.duplex is not Duplex.ACTIVE]
        hit = next((w for w in ups if w.hit_slot(history) is not None), None)
        if hit is None:
            hit = next((w for w in ups if w.empty_slots()), None)
        return hit.worker_id if hit is not None else None
