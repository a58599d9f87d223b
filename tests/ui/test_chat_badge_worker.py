"""The line under a reply names the remote worker that wrote it (a local one goes unnamed); the
tooltip names the worker either way."""

from __future__ import annotations

from desktop.ui.chat.badge import Badge

STATS = {"input_tokens": 120, "cached_tokens": 100, "generated_tokens": 11, "kind": "extend", "ttft_ms": 40.0,
         "decode_ms": 500.0, "finish_reason": "eos"}


def test_badge_names_a_remote_worker(qtbot, screenshot):
    badge = Badge()
    qtbot.addWidget(badge)
    badge.set_stats({**STATS, "worker": "remote0"})
    badge.resize(520, 24)
    badge.show()
    assert badge.text().endswith(" · remote0") and "Answered by: remote0" in badge.toolTip()
    screenshot(badge, "badge_remote_worker")
    badge.set_stats({**STATS, "worker": "cpu0"})
    assert "cpu0" not in badge.text() and "Answered by: cpu0" in badge.toolTip()


def test_badge_says_where_a_conversation_moved_from(qtbot, screenshot):
    """The gateway's reason for a turn rebuilt after its worker left shows on the line and in the tooltip."""
    badge = Badge()
    qtbot.addWidget(badge)
    badge.set_stats({**STATS, "kind": "miss", "cached_tokens": 0, "worker": "cpu0",
                     "miss_reason": "moved from remote0 (unreachable)"})
    badge.resize(520, 24)
    badge.show()
    assert badge.text().startswith("cached 0 / new 120 tokens") and badge.text().endswith(" · moved from remote0 (unreachable)")
    assert "Cache: The worker that held this conversation's cache (remote0 (unreachable)) went away" in badge.toolTip()
    screenshot(badge, "badge_moved_from_worker")
