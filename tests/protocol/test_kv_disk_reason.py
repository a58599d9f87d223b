"""A turn whose history came back from a snapshot on disk says so: the badge's words and sentence."""

from desktop.chat.export import stats_line
from desktop.protocol import MatchKind
from desktop.protocol.reasons import CacheReason, label_of, sentence_of


def test_a_restored_turn_says_restored_from_disk():
    assert MatchKind("disk") is MatchKind.DISK
    stats = {"input_tokens": 120, "cached_tokens": 100, "kind": "disk", "miss_reason": CacheReason.RESTORED.value}
    assert "restored from disk" in stats_line(stats) and "cached 100 / new 20 tokens" in stats_line(stats)
    assert label_of("", "disk") == "restored from disk"  # no words stored: the kind says it
    assert "restored from disk" in sentence_of(CacheReason.RESTORED.value)
    assert label_of("edited", "disk") == "edited"  # an edit restored from disk says why it reused only part
