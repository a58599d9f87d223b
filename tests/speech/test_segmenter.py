"""Segmentation policy: boundaries, the small first window, the token cap, the flush timer, the
whole-reply window, markdown cleaning, and chunking-independence (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.speech.segmenter import Segmenter, SegmenterConfig, speakable


def segments(text: str | list[str], config: SegmenterConfig = SegmenterConfig()) -> list[str]:
    """All pieces for `text` pushed at t=0 (as one delta or the given deltas), then finished."""
    seg = Segmenter(config, 0.0)
    out: list[str] = []
    for delta in [text] if isinstance(text, str) else text:
        out += seg.push(delta, 0.0)
    return out + seg.finish()


def test_sentences_are_cut_at_their_end_and_the_rest_comes_at_finish():
    assert segments("Hello there my friend. How are you? I am fine") == \
        ["Hello there my friend.", "How are you?", "I am fine"]


def test_a_sentence_end_waits_for_the_next_character():
    seg = Segmenter(SegmenterConfig(), 0.0)
    assert seg.push("It costs 3", 0.0) == []
    assert seg.push(".", 0.0) == []  # could still be "3.5"
    assert seg.push("5 dollars. Then", 0.0) == ["It costs 3.5 dollars."]


def test_first_window_flushes_at_a_word_boundary_after_six_words():
    assert segments("Well I think that the answer you want is here")[0] == "Well I think that the answer"


def test_first_window_prefers_the_last_clause_boundary():
    seg = Segmenter(SegmenterConfig(), 0.0)
    assert seg.push("Sure, here is what I found", 0.0) == []  # "found" may still grow
    assert seg.push(", and more ", 0.0) == ["Sure, here is what I found,"]


def test_first_clause_is_cut_as_soon_as_its_boundary_is_seen():
    seg = Segmenter(SegmenterConfig(), 0.0)
    assert seg.push("Paris is lovely,", 0.0) == []  # "lovely," could still be "lovely,5"
    assert seg.push(" and", 0.0) == ["Paris is lovely,"]  # three words: no need to wait for six
    assert seg.push(" it is old, very old. And", 0.0) == ["and it is old, very old."]  # then sentences
    assert segments("Here is the plan: we go now")[0] == "Here is the plan:"
    assert segments("It was very late — so we left")[0] == "It was very late —"


def test_first_segment_is_never_one_or_two_words():
    assert segments("Sure, here is what I found for you. ")[0] == "Sure, here is what I found"
    assert segments("Well, I think so, yes. ")[0] == "Well, I think so,"
    seg = Segmenter(SegmenterConfig(min_flush_interval_ms=600), 0.0)
    assert seg.push("Well I ", 0.0) == [] and seg.deadline() is None  # the timer waits for a third word
    assert seg.poll(5.0) == []
    assert seg.push("think ", 5.0) == ["Well I think"]  # the timer is long past: complete words go
    assert segments("Yes. The capital of France is Paris. ")[:2] == ["Yes. The capital of France is", "Paris."]
    assert segments("Hi there") == ["Hi there"]  # a reply that short is spoken whole at its end


def test_first_segment_never_ends_inside_a_word():
    seg = Segmenter(SegmenterConfig(), 0.0)
    assert seg.push("Well I think that the answ", 0.0) == []
    assert seg.push("er", 0.0) == []  # "answer" may still grow ("answers")
    assert seg.push(" is", 0.0) == ["Well I think that the answer"]


def test_the_old_first_window_is_kept_as_a_setting():
    old = SegmenterConfig(first_clause=False, first_min_tokens=1)
    assert segments("Sure, here is what I found for you. ", old)[0] == "Sure,"  # back from the cap
    assert segments("Paris is lovely, and it is old. ", old)[0] == "Paris is lovely,"


def test_later_segments_wait_for_max_segment_tokens():
    words = " ".join(f"w{i}" for i in range(60)) + " "
    out = segments(words, SegmenterConfig(first_window_tokens=2, max_segment_tokens=10))
    assert [len(s.split()) for s in out] == [2, 10, 10, 10, 10, 10, 8]


def test_the_cap_goes_back_to_a_clause_boundary():
    text = "a b. c d e, f g h i j k l m n o "
    assert segments(text, SegmenterConfig(first_window_tokens=2, max_segment_tokens=8)) == \
        ["a b.", "c d e,", "f g h i j k l m", "n o"]


def test_no_split_inside_a_word_and_abbreviations_and_list_numbers_are_not_sentence_ends():
    wide = SegmenterConfig(first_window_tokens=20)
    assert segments(["Mr", ". Smith met Dr. Who at 3.5 p.m. today. ", "Next."], wide) == \
        ["Mr. Smith met Dr. Who at 3.5 p.m. today.", "Next."]
    assert segments("Here are the steps:\n1. Open it\n2. Close it\n") == \
        ["Here are the steps:", "1. Open it", "2. Close it", ""]


def test_cjk_sentences_and_tokens():
    assert segments("你好。今天天气很好！我们去公园吧") == ["你好。", "今天天气很好！", "我们去公园吧"]
    assert segments("一二三四五六七八")[0] == "一二三四五六"


def test_flush_timer_speaks_complete_words_when_no_boundary_comes():
    seg = Segmenter(SegmenterConfig(min_flush_interval_ms=600), 10.0)
    assert seg.push("one two three fo", 10.1) == []
    assert seg.deadline() == pytest.approx(10.6)
    assert seg.poll(10.59) == []
    assert seg.poll(10.6) == ["one two three"]  # "fo" may still grow
    assert seg.deadline() is None  # nothing complete is pending
    assert seg.push("ur five ", 11.0) == []
    assert seg.poll(11.19) == []  # 600 ms after the last flush (10.6), not after the last text
    assert seg.poll(11.2) == ["four five"]
    assert seg.finish() == [""]


def test_whole_reply_window_waits_for_finish():
    seg = Segmenter(SegmenterConfig(window_size=-1), 0.0)
    for t, delta in enumerate(["Hello there. ", "How are you? " * 30, "Bye"]):
        assert seg.push(delta, float(t)) == []
        assert seg.poll(t + 100.0) == [] and seg.deadline() is None
    assert seg.finish() == ["Hello there. " + "How are you? " * 29 + "How are you? Bye"]


def test_window_size_n_groups_sentences_after_the_first():
    assert segments("This is one. Two. Three. Four. Five. Six.", SegmenterConfig(window_size=2)) == \
        ["This is one.", "Two. Three.", "Four. Five.", "Six."]


def test_reply_without_any_boundary_is_spoken_at_finish():
    assert segments("ok so yes") == ["ok so yes"]
    assert segments("") == [""]


def test_markdown_noise_is_not_spoken():
    assert speakable("## Title\n* **Bold** item\n- `code` and [a link](http://x.y)\n```python") == \
        "Title Bold item code and a link"
    assert segments("```python\nprint(1)\n```\n* done\n") == ["print(1)", "done", ""]


@pytest.mark.parametrize("kwargs", [dict(first_window_tokens=0), dict(max_segment_tokens=3), dict(first_min_tokens=0),
                                    dict(min_flush_interval_ms=0), dict(window_size=0), dict(window_size=-2)])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        SegmenterConfig(**kwargs)


_WORD = st.text(alphabet="abcXYZ123你好", min_size=1, max_size=6)
_SEP = st.sampled_from([" ", "  ", "\n", ". ", ", ", "! ", "? ", "; ", ": ", " — ", "。", "… ", ".\n"])
_TEXT = st.lists(st.tuples(_WORD, _SEP), min_size=1, max_size=60).map(lambda ws: "".join(a + b for a, b in ws))


@settings(max_examples=150, deadline=None)
@given(text=_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
       window=st.sampled_from([1, 2, -1]), first=st.integers(1, 8), least=st.integers(1, 4),
       clause=st.booleans())
def test_random_chunking_gives_the_same_segments(text, cuts, window, first, least, clause):
    config = SegmenterConfig(first_window_tokens=first, max_segment_tokens=first + 7, window_size=window,
                             first_min_tokens=least, first_clause=clause)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    deltas = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = segments(text, config)
    assert segments(deltas, config) == whole
    assert "".join("".join(whole).split()) == "".join(text.split())
    assert all(piece for piece in whole[:-1])
