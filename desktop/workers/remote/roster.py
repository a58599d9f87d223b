"""The remote workers of one running engine, by worker id, and what a new list of servers in the
settings means for them: which workers leave the pool and which servers join it, under which ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from desktop.protocol import WorkerHost
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec

_NUMBERED = re.compile(r"remote(\d+)")


@dataclass(frozen=True, slots=True)
class RosterChange:
    """`remove`: the workers whose server is no longer listed as it was (worker id, its spec);
    `add`: the servers to start (new worker id, spec), in the settings' order."""

    remove: tuple[tuple[str, RemoteSpec], ...] = ()
    add: tuple[tuple[str, RemoteSpec], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.remove or self.add)

    def summary(self) -> str:
        """One line for the status bar, e.g. "Remote worker added: http://gpu:8080 (remote2)."."""
        parts = [f"{verb}: " + ", ".join(f"{spec.url} ({wid})" for wid, spec in pairs)
                 for verb, pairs in (("added", self.add), ("removed", self.remove)) if pairs]
        count = len(self.add) + len(self.remove)
        return f"Remote worker{'s' if count > 1 else ''} " + "; ".join(parts) + "." if parts else ""


class RemoteRoster:
    """Worker id → RemoteSpec for the engine's remote workers. At boot the ids are remote0,
    remote1, … (factory.remote_hosts); a server added later takes the next number this engine
    never used, so one id never names two servers (in Admin, /metrics, or a late event)."""

    def __init__(self, specs: Mapping[str, RemoteSpec]) -> None:
        self.specs = dict(specs)
        numbers = [int(m.group(1)) for wid in self.specs if (m := _NUMBERED.fullmatch(wid))]
        self._next = max(numbers, default=-1) + 1

    @classmethod
    def of(cls, hosts: Iterable[WorkerHost]) -> RemoteRoster:
        """The roster of an engine's hosts (its RemoteHosts; the local workers are not in it)."""
        return cls({h.worker_id: h.spec for h in hosts if isinstance(h, RemoteHost)})

    def change(self, wanted: Sequence[RemoteSpec]) -> RosterChange:
        """Bring the roster to `wanted` and say what that takes: a server listed with the same
        spec (address, model, key, slots) keeps its worker and id; any other running one leaves;
        each new (or changed) one joins under a new id."""
        unmatched = dict(self.specs)
        add: list[tuple[str, RemoteSpec]] = []
        for spec in wanted:
            kept = next((wid for wid, have in unmatched.items() if have == spec), None)
            if kept is not None:
                del unmatched[kept]
                continue
            add.append((f"remote{self._next}", spec))
            self._next += 1
        for wid in unmatched:
            del self.specs[wid]
        self.specs.update(add)
        return RosterChange(tuple(unmatched.items()), tuple(add))
