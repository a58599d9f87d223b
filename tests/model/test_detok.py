"""Tests of StreamDecoder: pieces never split a UTF-8 character, concatenate to the full
decode, and stop exactly before a stop string while releasing look-alike prefixes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.model.detok import StreamDecoder
from desktop.model.tiny import tiny_tokenizer

TOK = tiny_tokenizer()
VOCAB = len(TOK)
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
ALPHABET = "ab STOP<>|\né日本語🙂ü"
FFFD = "\ufffd"


def _stream(ids, stop=(), skip=True) -> tuple[StreamDecoder, list[str]]:
    dec = StreamDecoder(TOK, stop=stop, skip_special_tokens=skip)
    pieces = [dec.push(i) for i in ids]
    pieces.append(dec.finish())
    return dec, pieces


def _check_pieces(pieces: list[str], full: str) -> None:
    done = ""
    for p in pieces:
        done += p
        assert full.startswith(done)  # never retracted, never ahead of the full decode
        if FFFD not in full:
            assert FFFD not in p
    assert done == full


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, VOCAB - 1), max_size=40), st.booleans())
def test_random_ids_concatenate_to_full_decode(ids: list[int], skip: bool) -> None:
    dec, pieces = _stream(ids, skip=skip)
    full = TOK.decode(ids, skip_special_tokens=skip)
    _check_pieces(pieces, full)
    assert dec.text == full and not dec.stopped


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_text_round_trips_without_partial_chars(text: str) -> None:
    ids = TOK.encode(text)
    _, pieces = _stream(ids)
    assert TOK.decode(ids) == text
    _check_pieces(pieces, text)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=ALPHABET, max_size=30),
    st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=5), max_size=3),
)
def test_stop_strings_cut_at_first_occurrence(text: str, stops: list[str]) -> None:
    ids = TOK.encode(text)
    dec, pieces = _stream(ids, stop=stops)
    want, stopped = text, False
    for end in range(1, len(text) + 1):  # the first stop to be completed, then the longest
        if done := [s for s in stops if text[:end].endswith(s)]:
            want, stopped = text[: end - max(map(len, done))], True
            break
    _check_pieces(pieces, want)
    assert dec.stopped == stopped


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=15), st.text(alphabet=ALPHABET, max_size=15))
def test_multi_token_stop_stops_exactly_there(before: str, after: str) -> None:
    stop = "日本語🙂"
    ids = TOK.encode(before + stop + after)
    assert len(TOK.encode(stop)) > 1
    dec = StreamDecoder(TOK, stop=[stop])
    out = ""
    for i in ids:
        out += dec.push(i)
        if dec.stopped:
            break
    cut = (before + stop).find(stop)
    assert dec.stopped and out == dec.text == (before + stop)[:cut]
    assert all(dec.push(i) == "" for i in ids) and dec.finish() == ""
    assert dec.text == out


def test_partial_bytes_are_held_until_the_char_completes() -> None:
    ids = TOK.encode("🙂")
    assert len(ids) > 1
    dec = StreamDecoder(TOK)
    assert [dec.push(i) for i in ids] == [""] * (len(ids) - 1) + ["🙂"]


def test_unfinished_char_is_flushed_as_replacement() -> None:
    ids = TOK.encode("a🙂")[:-1]
    dec, pieces = _stream(ids)
    assert pieces[-1].endswith(FFFD) and dec.text == TOK.decode(ids)


def test_stop_prefix_lookalike_is_released_later() -> None:
    text = "go STOx then ST"
    ids = TOK.encode(text)
    dec = StreamDecoder(TOK, stop=["STOP"])
    shown, held_seen = "", False
    for n, i in enumerate(ids, 1):
        shown += dec.push(i)
        if TOK.decode(ids[:n]).endswith("STO"):
            assert shown == "go "  # "STO" could still become "STOP"
            held_seen = True
    assert held_seen and shown.startswith("go STOx")  # released once "x" ruled it out
    assert shown == "go STOx then "  # the trailing "ST" is held until finish()
    assert shown + dec.finish() == text and dec.text == text
    assert not dec.stopped


def test_special_tokens_skipped_by_default() -> None:
    ids = TOK.encode("hi") + [IM_END]
    assert _stream(ids)[0].text == "hi"
    assert _stream(ids, skip=False)[0].text == "hi<|im_end|>"
    dec, _ = _stream(ids + TOK.encode("more"), stop=["<|im_end|>"], skip=False)
    assert dec.stopped and dec.text == "hi"


def test_window_stays_small() -> None:
    lengths: list[int] = []

    class Spy:
        def decode(self, ids, **kw):
            lengths.append(len(ids))
            return TOK.decode(ids, **kw)

    ids = TOK.encode("café 日本語 🙂 " * 40)
    dec = StreamDecoder(Spy())
    text = "".join(dec.push(i) for i in ids) + dec.finish()
    assert text == TOK.decode(ids)
    assert max(lengths) <= 8


def test_push_after_finish_raises() -> None:
    dec = StreamDecoder(TOK)
    dec.finish()
    with pytest.raises(RuntimeError):
        dec.push(5)
