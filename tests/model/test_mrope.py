"""M-RoPE positions in plain ints (model/mrope.py): image indices, rope deltas and a slot's
track through crops and copies, against hand-worked cases (the whole-prompt check against
Qwen2-VL's own get_rope_index is in tests/workers/test_cache_invariant_images.py)."""

from __future__ import annotations

import pytest

from desktop.model.mrope import Grid, RopeTrack

K, L = -7, -9  # two image keys
GRIDS = {K: Grid(1, 2, 3), L: Grid(1, 4, 1)}  # 6 positions advancing 3; 4 positions advancing 4


def test_text_then_an_image_then_text():
    rows = RopeTrack().positions(0, [5, 6, K, K, K, K, K, K, 8], GRIDS.__getitem__)
    assert rows[0] == [0, 1, 2, 2, 2, 2, 2, 2, 5]
    assert rows[1] == [0, 1, 2, 2, 2, 3, 3, 3, 5]
    assert rows[2] == [0, 1, 2, 3, 4, 2, 3, 4, 5]


def test_a_suffix_continues_where_the_whole_prompt_would():
    ids = [1, K, K, K, K, K, K, 2, 3, L, L, L, L, 4, 5]
    whole = RopeTrack().positions(0, ids, GRIDS.__getitem__)
    for cut in (1, 7, 9, 13, 14):  # chunks that never split an image
        track = RopeTrack()
        head = track.positions(0, ids[:cut], GRIDS.__getitem__)
        tail = track.positions(cut, ids[cut:], GRIDS.__getitem__)
        assert [h + t for h, t in zip(head, tail)] == whole
    track = RopeTrack()
    track.positions(0, ids, GRIDS.__getitem__)
    assert track.delta() == (3 - 6) + (4 - 4) and track.delta(7) == -3 and track.delta(6) == 0


def test_crop_prefix_and_stale_images():
    track = RopeTrack()
    track.positions(0, [1, K, K, K, K, K, K, 2, L, L, L, L, 3], GRIDS.__getitem__)
    copy = track.prefix(8)
    assert copy.delta() == -3 and len(copy.spans) == 1
    track.crop(7)  # back to before the text after the first image: its place stays
    assert track.delta() == -3
    track.crop(3)  # inside the first image's run: it is gone
    assert track.delta() == 0 and copy.delta() == -3  # the copy is independent
    again = RopeTrack()
    again.positions(0, [1, K, K, K, K, K, K], GRIDS.__getitem__)
    assert again.positions(1, [2, 3], GRIDS.__getitem__) == [[1, 2]] * 3  # a regrown KV drops stale places


def test_a_run_of_the_wrong_length_is_an_error():
    with pytest.raises(RuntimeError, match="not 6 positions"):
        RopeTrack().positions(0, [1, K, K, K, 2], GRIDS.__getitem__)
