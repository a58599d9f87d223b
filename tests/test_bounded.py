"""BoundedDict: the oldest entries go past a count or a size budget, first-set or LRU order."""

import pytest

from desktop.bounded import BoundedDict


def test_the_oldest_set_goes_past_max_items_and_a_read_does_not_save_it():
    d: BoundedDict[str, int] = BoundedDict(2)
    d["a"], d["b"] = 1, 2
    assert d["a"] == 1 and d.get("a") == 1
    d["a"] = 10  # set again: keeps its place
    d["c"] = 3
    assert list(d.items()) == [("b", 2), ("c", 3)]


def test_lru_a_read_or_a_set_makes_an_entry_the_newest_but_in_does_not():
    d: BoundedDict[str, int] = BoundedDict(2, lru=True)
    d["a"], d["b"] = 1, 2
    assert d.get("a") == 1
    d["c"] = 3
    assert list(d) == ["a", "c"]
    assert "a" in d
    d["c"] = 4
    d["d"] = 5
    assert list(d) == ["c", "d"]
    assert sum(d.values()) == 9 and list(d) == ["c", "d"]  # reading them all changes no order


def test_a_size_budget_drops_the_oldest_and_counts_replaced_and_deleted_entries():
    d: BoundedDict[str, bytes] = BoundedDict(max_size=10, size=len)
    d["a"], d["b"] = b"12345", b"1234"
    assert d.total == 9
    d["a"] = b"1"  # replaced: its old size goes
    assert d.total == 5
    d["c"] = b"123456"
    assert d.total == 10 and list(d) == ["b", "c"]
    del d["b"]
    assert d.total == 6
    assert d.pop("c") == b"123456" and d.total == 0 and not d
    d["x"] = b"x" * 11  # larger than the budget alone: not kept
    assert not d and d.total == 0


def test_keep_newest_and_growth_in_place():
    d: BoundedDict[str, list[int]] = BoundedDict(3, max_size=5, size=sum, keep_newest=1)
    d["a"], d["b"] = [], []
    d["a"].append(4)
    d.grew(4)
    d["b"].append(3)
    d.grew(3)
    assert list(d) == ["b"] and d.total == 3
    d["b"].append(9)
    d.grew(9)  # over the budget alone, but the newest is kept
    assert list(d) == ["b"] and d.total == 12


def test_update_drops_the_oldest_once_after_setting_everything():
    d: BoundedDict[str, None] = BoundedDict(2)
    d.update(dict.fromkeys("ab"))
    d.update(dict.fromkeys("ca"))  # "a" is there already: it keeps its place, so it goes first
    assert list(d) == ["b", "c"]
    d.clear()
    assert len(d) == 0 and d.total == 0


def test_a_size_budget_needs_a_size_function():
    with pytest.raises(ValueError):
        BoundedDict(max_size=1)
