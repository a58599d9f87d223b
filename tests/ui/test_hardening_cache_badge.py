"""Issue 19, new-user item 1: the badge and Admin speak the one cache vocabulary
(protocol/reasons.py), always with a reason, and Admin's hit rate counts history tokens reused."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from PySide6.QtWidgets import QVBoxLayout, QWidget

from desktop.protocol import TokenStats
from desktop.protocol.reasons import CacheReason
from desktop.ui.admin.counters import CountersRow
from desktop.gateway.monitor import Snapshot
from desktop.protocol.engine_stats import RequestCounts
from desktop.ui.chat.badge import Badge
from desktop.ui.theme import WINDOW_CSS
from desktop.workers.stats import WorkerCounters

pytestmark = pytest.mark.hardening

TURN = {"input_tokens": 5900, "cached_tokens": 60, "generated_tokens": 40, "kind": "spc", "ttft_ms": 900.0,
        "decode_ms": 2600.0, "finish_reason": "eos", "history_tokens": 5850}


def test_every_badge_names_its_reason_and_explains_it(qtbot, screenshot):
    box = QWidget()
    layout = QVBoxLayout(box)
    badges = []
    for reason in CacheReason:
        badge = Badge()
        badge.set_stats({**TURN, "miss_reason": reason.value})
        layout.addWidget(badge)
        badges.append((reason, badge))
    qtbot.addWidget(box)
    box.resize(640, 40 * len(badges))
    box.show()
    for reason, badge in badges:
        assert badge.text().endswith(f" · {reason.value}"), badge.text()
        assert badge.toolTip().startswith(f"Cache: {reason.sentence}")
        assert "History before your message: 5850 tokens, 60 from cache" in badge.toolTip()
    screenshot(box, "badge_cache_reasons")


def test_a_partial_reuse_of_an_older_version_still_shows_a_reason(qtbot):
    """Stats stored by earlier versions: a full hit had no words, a partial reuse showed none at all."""
    badge = Badge()
    qtbot.addWidget(badge)
    badge.set_stats({**TURN, "kind": "extend", "miss_reason": ""})
    assert badge.text().endswith(" · history cached")
    badge.set_stats({**TURN, "kind": "prefix", "miss_reason": "history partly cached"})
    assert badge.text().endswith(" · evicted") and "dropped to make room" in badge.toolTip()
    badge.set_stats({**TURN, "kind": "spc", "miss_reason": "not cached since this worker loaded"})
    assert badge.text().endswith(" · not cached since the model loaded")


def test_admin_hit_rate_counts_history_tokens_not_requests(qtbot, screenshot):
    """The issue's case: two turns that re-read 5,832 and 3,738 tokens with only their system
    prompt cached were "100 % cache hits"."""
    counters = WorkerCounters()
    for history in (5832, 3738):
        counters.record(TokenStats(input_tokens=history + 20, cached_tokens=60, kind="spc", history_tokens=history,
                                   miss_reason=CacheReason.NOT_SEEN.value))
    snap = counters.snapshot()
    assert snap["cache_hit_rate"] == pytest.approx(120 / (5832 + 3738))
    row = CountersRow()
    row.setStyleSheet(WINDOW_CSS)
    row.show_snapshot(Snapshot([], [], [], snap, RequestCounts(completed=2, submitted=2), {}, {}))
    qtbot.addWidget(row)
    row.resize(900, 90)
    row.show()
    assert row.hit_rate.value.text() == "1%" and "9,570\u00a0history tokens" in row.hit_rate.detail.text()
    assert "not cached since the model loaded: 2" in row.hit_rate.toolTip()
    screenshot(row, "admin_hit_rate_by_tokens")
    assert asdict(TokenStats())["history_tokens"] == 0  # stored with each message's stats
