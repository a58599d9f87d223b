"""The remote roster: a new list of servers keeps the workers of unchanged ones (same id), takes
out the removed or changed ones, and gives new ones ids this engine never used."""

from __future__ import annotations

from desktop.model.loader import ModelSpec
from desktop.workers.config import WorkerConfig
from desktop.workers.factory import remote_hosts
from desktop.workers.remote.roster import RemoteRoster, RosterChange
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.thread_host import ThreadHost

A, B, C = RemoteSpec("http://a:1"), RemoteSpec("http://b:2"), RemoteSpec("http://c:3")


def test_unchanged_servers_keep_their_worker_and_new_ones_get_fresh_ids() -> None:
    roster = RemoteRoster({"remote0": A, "remote1": B})
    assert not roster.change([A, B]) and roster.specs == {"remote0": A, "remote1": B}
    change = roster.change([A, B, C])
    assert change == RosterChange((), (("remote2", C),))
    assert change.summary() == "Remote worker added: http://c:3 (remote2)."
    change = roster.change([A, C])
    assert change == RosterChange((("remote1", B),), ())
    assert change.summary() == "Remote worker removed: http://b:2 (remote1)."
    again = roster.change([A, C, B])  # B again: a new worker, never remote1's id a second time
    assert again.add == (("remote3", B),) and roster.specs == {"remote0": A, "remote2": C, "remote3": B}


def test_a_changed_key_or_model_is_a_new_worker_and_everything_can_go() -> None:
    roster = RemoteRoster({"remote0": A, "remote1": B})
    keyed = RemoteSpec("http://a:1", api_key="sk-2")
    change = roster.change([keyed, B])
    assert change.remove == (("remote0", A),) and change.add == (("remote2", keyed),)
    assert change.summary() == "Remote workers added: http://a:1 (remote2); removed: http://a:1 (remote0)."
    modelled = RemoteSpec("http://b:2", model="other")
    assert roster.change([keyed, modelled]) == RosterChange((("remote1", B),), (("remote3", modelled),))
    gone = roster.change([])
    assert [wid for wid, _ in gone.remove] == ["remote2", "remote3"] and not gone.add and roster.specs == {}
    assert roster.change([A]).add == (("remote4", A),)


def test_the_roster_of_an_engine_holds_its_remote_hosts_only() -> None:
    hosts = [ThreadHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=1), threads=1), *remote_hosts([A, B])]
    try:
        roster = RemoteRoster.of(hosts)
        assert roster.specs == {"remote0": A, "remote1": B}
        assert roster.change([C]).add == (("remote2", C),)
        built = remote_hosts([C, A], ids=["remote7", "remote9"])
        assert [(h.worker_id, h.spec) for h in built] == [("remote7", C), ("remote9", A)]
        hosts += built
    finally:
        for host in hosts:
            host.close()
