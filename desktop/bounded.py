"""A dict that forgets its oldest entries past a count or a size budget: the one helper behind the
caches and the "remember the last N ids" tables (finished replies, closed sessions, evicted hashes)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedDict(MutableMapping[K, V]):
    """Keys in age order, the oldest first. Setting a key drops the oldest entries while there are
    more than `max_items` of them, or while their `size(value)`s add up to more than `max_size`
    (the newest `keep_newest` are never dropped). Oldest means first set; with `lru`, least
    recently set or read (`d[k]`, `d.get(k)`; `k in d` is not a read). Setting a key that is there
    already keeps its place unless `lru`. Not thread-safe: its owner locks."""

    def __init__(self, max_items: int | None = None, *, max_size: float | None = None,
                 size: Callable[[V], float] | None = None, lru: bool = False, keep_newest: int = 0) -> None:
        if max_size is not None and size is None:
            raise ValueError("max_size needs a size function")
        self.max_items, self.max_size = max_items, max_size
        self._size, self._lru, self._keep = size, lru, keep_newest
        self._data: OrderedDict[K, V] = OrderedDict()
        self.total: float = 0  # the sum of the entries' sizes (with `size`)

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        if self._lru:
            self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._put(key, value)
        self.trim()

    def __delitem__(self, key: K) -> None:
        value = self._data.pop(key)
        if self._size is not None:
            self.total -= self._size(value)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._data)!r})"

    def keys(self) -> KeysView[K]:
        return self._data.keys()

    def values(self) -> ValuesView[V]:  # reading them all is no use: the order stays
        return self._data.values()

    def items(self) -> ItemsView[K, V]:
        return self._data.items()

    def update(self, other: Mapping[K, V] | Iterable[tuple[K, V]] = (), /, **kwargs: Any) -> None:
        """Set every entry, then drop the oldest once (not after each)."""
        for key, value in (other.items() if isinstance(other, Mapping) else other):
            self._put(key, value)
        for key, value in kwargs.items():
            self._put(key, value)  # type: ignore[arg-type]
        self.trim()

    def clear(self) -> None:
        self._data.clear()
        self.total = 0

    def grew(self, by: float) -> None:
        """An entry's size grew by `by` since it was set (its value is mutable): count it, and drop
        the oldest entries if the budget is exceeded now."""
        self.total += by
        self.trim()

    def trim(self) -> None:
        """Drop the oldest entries until the limits hold (done by every set)."""
        while len(self._data) > self._keep and self._over():
            del self[next(iter(self._data))]

    def _over(self) -> bool:
        return ((self.max_items is not None and len(self._data) > self.max_items)
                or (self.max_size is not None and self.total > self.max_size))

    def _put(self, key: K, value: V) -> None:
        if self._size is not None:
            if key in self._data:
                self.total -= self._size(self._data[key])
            self.total += self._size(value)
        self._data[key] = value
        if self._lru:
            self._data.move_to_end(key)
