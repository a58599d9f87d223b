"""What is on the speaker: each stretch of the Voice's speech (a reply, or a replay of one) by
sink id, from its first words until it has played out or is stopped, and which replay is current."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from desktop.speech.finished import FinishedReplies, Over

FINISH_SLACK_S = 1.0  # a sink that stops draining still reports "finished" this long after


@dataclass(slots=True, eq=False)
class Play:
    """One stretch of speech on the sink: a live reply (sink id = request id) or a replay."""

    request_id: str
    replay: bool = False
    started: bool = False
    seconds: float = 0.0  # audio written so far
    done_at: float | None = None  # clock time when all of it was written


class Plays:
    """The Voice's table of plays. A reply silenced in `finished` (the Voice's registry) does not
    start again; stopping one marks it there. Thread-safe: the caller, the relay and the pipeline's
    stages all use it."""

    def __init__(self, finished: FinishedReplies) -> None:
        self.finished = finished
        self._lock = threading.Lock()
        self._plays: dict[str, Play] = {}
        self._gen = 0  # bumped by every stop: a replay started before it does not play on

    def __bool__(self) -> bool:
        return bool(self._plays)

    def begin(self, request_id: str) -> bool:
        """A reply starts (its sink id is its request id); False if it was silenced already."""
        with self._lock:
            if self.finished.at_least(request_id, Over.SILENCED):
                return False
            self._plays[request_id] = Play(request_id)
            return True

    def begin_replay(self, request_id: str) -> tuple[str, int]:
        """A replay of a reply: its fresh sink id (the reply's own was flushed or ended) and the
        generation it belongs to."""
        with self._lock:
            sid = f"{request_id}#replay{self._gen}"
            self._plays[sid] = Play(request_id, replay=True)
            return sid, self._gen

    def stop(self, request_id: str | None) -> tuple[list[str], list[Play], set[str]]:
        """Take out a reply's plays (its replays too), or all with None: (their sink ids, the
        plays, the replies silenced: each live one, and `request_id` even if it has not begun)."""
        with self._lock:
            self._gen += 1
            sids = [s for s, p in self._plays.items() if request_id is None or p.request_id == request_id]
            plays = [self._plays.pop(s) for s in sids]
            rids = {p.request_id for p in plays if not p.replay} | ({request_id} if request_id else set())
            for rid in rids:
                self.finished.mark(rid, Over.SILENCED)
        return sids, plays, rids

    def fail(self, request_id: str) -> Play | None:
        """The reply failed: silenced, and its live play (if any) taken out."""
        with self._lock:
            self.finished.mark(request_id, Over.SILENCED)
            return self._plays.pop(request_id, None)

    def current(self, gen: int) -> bool:
        """Whether no stop came since replay generation `gen`."""
        return gen == self._gen

    def start_replay(self, sink_id: str, gen: int) -> Play | None:
        """The replay's play, marked started, unless it was stopped meanwhile."""
        with self._lock:
            play = self._plays.get(sink_id)
            if play is None or gen != self._gen:
                return None
            play.started = True
            return play

    def audio(self, request_id: str, seconds: float, keep: Callable[[], None]) -> bool | None:
        """Audio of a live reply was written: None if it was stopped; else whether this was its
        first (and then `keep()` ran, in the same step as the check, so a stop cannot come between)."""
        with self._lock:
            play = self._plays.get(request_id)
            if play is None:
                return None
            keep()
            play.seconds += seconds
            first, play.started = not play.started, True
            return first

    def written(self, sink_id: str, now: float, play: Play | None = None) -> None:
        """All of a play's audio is written (by the pipeline: `play` None, or the replay `play`)."""
        with self._lock:
            found = self._plays.get(sink_id)
            if found is not None and (play is None or found is play):
                found.done_at = now

    def played_out(self, now: float, queued_s: Callable[[str], float]) -> list[Play]:
        """Take out the plays whose audio has all been heard (or should have been by now)."""
        done = []
        with self._lock:
            for sid, play in list(self._plays.items()):
                if play.done_at is None:
                    continue
                if queued_s(sid) <= 0 or now >= play.done_at + play.seconds + FINISH_SLACK_S:
                    del self._plays[sid]
                    done.append(play)
        return done
