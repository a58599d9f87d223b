"""The row of counter cards above the admin tables: requests, cache hit rate, tokens saved,
time to first token (p50 / p95) and the gateway's routing decisions."""

from __future__ import annotations

import re

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from desktop.ui.admin.format import percent
from desktop.gateway.monitor import Snapshot


class CounterCard(QFrame):
    def __init__(self, caption: str, tip: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("counterCard")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(2)
        self.value = QLabel("—")
        self.value.setObjectName("counterValue")
        self.value.setWordWrap(True)  # a narrow window: "0 hit ·" / "0 free" on two lines, not cut
        self.detail = QLabel(caption)
        self.detail.setObjectName("counterCaption")
        self.detail.setWordWrap(True)
        layout.addWidget(self.value)
        layout.addWidget(self.detail)
        self.caption = caption
        self.setToolTip(tip)

    def set(self, value: str, detail: str = "") -> None:
        self.value.setText(value.replace(" ", "\u00a0").replace("·\u00a0", "· "))  # wraps after a "·" only
        self.detail.setText(phrases(f"{self.caption} · {detail}" if detail else self.caption))


HIT_TIP = "History tokens (everything before each new message) taken from the KV cache, of all history tokens"


def reasons_tip(reasons: dict[str, int]) -> str:
    """The hit rate's tooltip: what it counts, then how many turns had each cache reason (the
    words of the chat's badges)."""
    if not reasons:
        return HIT_TIP
    return "\n".join([HIT_TIP, "", "Turns by reason:", *(f"{words}: {n}" for words, n in reasons.items())])


def phrases(text: str) -> str:
    """A narrow card may wrap its caption, but never between a count and its word ("0 running")."""
    return re.sub(r"(\d) ", "\\1\u00a0", text)


class CountersRow(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.requests = CounterCard("requests done", "Requests completed since the model was loaded, of all submitted")
        self.hit_rate = CounterCard("cache hits", HIT_TIP)
        self.saved = CounterCard("tokens saved", "Prompt tokens taken from the KV cache instead of being computed again")
        self.ttft = CounterCard("TTFT p50 / p95", "Time to first token as measured in the workers")
        self.routing = CounterCard("routing", "Where the gateway sent requests: cached history (hit), a free "
                                   "slot, an evicted slot, a pinned session")
        for card in (self.requests, self.hit_rate, self.saved, self.ttft, self.routing):
            layout.addWidget(card, 1)

    def show_snapshot(self, snap: Snapshot) -> None:
        req, c = snap.requests, snap.counters
        failed = req.failed
        api = snap.origins.get("api", 0)
        detail = f"{failed} failed" if failed else f"{req.running} running"
        self.requests.set(f"{req.completed} / {req.submitted}",
                          f"{detail} · {api} via API" if api else detail)
        if c.get("requests"):
            history = int(c.get("history_tokens", 0))
            self.hit_rate.set(percent(c["cache_hit_rate"]) if history else "—",
                              f"of {history:,} history tokens" if history else "no history yet")
            self.hit_rate.setToolTip(reasons_tip(c.get("reasons") or {}))
            total = c.get("input_tokens", 0)
            self.saved.set(f"{c['tokens_saved']:,}", f"of {total:,}" if total else "")
            p50, p95 = c["ttft_p50_ms"], c["ttft_p95_ms"]
            self.ttft.set(f"{p50:.0f} / {p95:.0f} ms" if p50 > 0 else "—")
        else:
            self.hit_rate.set("—")
            self.saved.set("0")
            self.ttft.set("—")
        r = snap.routing
        self.routing.set(f"{r.get('hit', 0)} hit · {r.get('free', 0)} free",
                         f"{r.get('evict', 0)} evict · {r.get('session', 0)} session")
