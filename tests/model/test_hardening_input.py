"""Issue 8, item 2 and 5: every field of SamplingParams and of a message is checked at the door
(types, ranges, NaN/inf, bools are not numbers, UTF-8 text, size) with a clear InvalidRequest."""

from __future__ import annotations

import math

import pytest

from desktop.errors import ContextOverflow, InvalidRequest
from desktop.model.messages import Message, char_limit, parse_messages
from desktop.model.params import SamplingParams, as_params

pytestmark = pytest.mark.hardening

BAD_PARAMS = [
    (dict(seed=2**70), "seed"),
    (dict(seed="abc"), "seed"),
    (dict(seed=True), "seed"),
    (dict(seed=-1), "seed"),
    (dict(seed=1.0), "seed"),
    (dict(top_k=1.5), "top_k"),
    (dict(top_k=True), "top_k"),
    (dict(top_k=-1), "top_k"),
    (dict(stop=(123,)), "stop"),
    (dict(stop=[None]), "stop"),
    (dict(stop=("",)), "stop"),
    (dict(stop="x\udfff"), "stop"),
    (dict(stop=5), "stop"),
    (dict(temperature="0.5"), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(temperature=math.inf), "temperature"),
    (dict(temperature=True), "temperature"),
    (dict(temperature=9), "temperature"),
    (dict(top_p=math.nan), "top_p"),
    (dict(top_p=0), "top_p"),
    (dict(top_p="1"), "top_p"),
    (dict(repetition_penalty=math.inf), "repetition_penalty"),
    (dict(repetition_penalty="1"), "repetition_penalty"),
    (dict(max_tokens=True), "max_tokens"),
    (dict(max_tokens=1.0), "max_tokens"),
    (dict(max_tokens=-1), "max_tokens"),
    (dict(max_tokens=10**12), "max_tokens"),
    (dict(ignore_eos="yes"), "ignore_eos"),
    (dict(ignore_eos=1), "ignore_eos"),
]


@pytest.mark.parametrize("kwargs, field", BAD_PARAMS, ids=[f"{k}" for k, _ in BAD_PARAMS])
def test_bad_sampling_value_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(InvalidRequest) as err:
        SamplingParams(**kwargs)
    assert field in err.value.message and err.value.code == "invalid_request"
    with pytest.raises(InvalidRequest):  # the same value in a mapping, as an API client sends it
        as_params(kwargs)


def test_good_values_are_kept_and_normalised():
    p = SamplingParams(temperature=1, top_p=1, seed=2**64 - 1, stop=["a", "b"], top_k=40)
    assert p.temperature == 1.0 and isinstance(p.temperature, float) and p.stop == ("a", "b") and p.seed == 2**64 - 1
    assert SamplingParams(stop="end").stop == ("end",)
    assert as_params(None) == SamplingParams() and as_params(p) is p
    assert as_params({"temperature": 0.7, "max_tokens": 5}) == SamplingParams(temperature=0.7, max_tokens=5)


@pytest.mark.parametrize("value", ["hot", 5, ["temperature"], {"temp": 1.0}])
def test_params_of_the_wrong_kind_are_refused(value):
    with pytest.raises(InvalidRequest, match="(?i)sampling|unknown"):
        as_params(value)


BAD_MESSAGES = [
    (None, "list"),
    (5, "list"),
    ("hello", "string"),
    ({"role": "user", "content": "hi"}, "list"),
    (["hello"], "Message 1"),
    ([{"role": 5, "content": "hi"}], "role"),
    ([{"role": None, "content": "hi"}], "role"),
    ([{"role": "user", "content": None}], "text"),
    ([{"role": "user", "content": 5}], "text"),
    ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "text"),
    ([{"role": "user", "content": "ok"}, {"role": "user", "content": "x\udfff"}], "Message 2"),
    ([{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}], "surrogate"),
]


@pytest.mark.parametrize("raw, words", BAD_MESSAGES, ids=[repr(r)[:40] for r, _ in BAD_MESSAGES])
def test_bad_messages_are_refused_with_a_clear_reason(raw, words):
    with pytest.raises(InvalidRequest) as err:
        parse_messages(raw)
    assert words in err.value.message and "Traceback" not in err.value.message


def test_a_lone_surrogate_is_refused_saying_where():
    with pytest.raises(InvalidRequest) as err:
        parse_messages([{"role": "user", "content": "fine"}, {"role": "user", "content": "ab\udfffc"}])
    assert "Message 2" in err.value.message and "U+DFFF" in err.value.message and "character 3" in err.value.message
    with pytest.raises(InvalidRequest, match="U\\+DFFF"):
        Message("user", "x\udfff")
    with pytest.raises(InvalidRequest, match="role"):
        Message(["user"], "x")  # type: ignore[arg-type]


def test_size_is_checked_before_anything_else():
    with pytest.raises(ContextOverflow) as err:
        parse_messages([{"role": "user", "content": "x" * 20_000}], max_chars=16_384)
    assert "Message 1" in err.value.message and "16,384" in err.value.message and "20,000" in err.value.message
    with pytest.raises(ContextOverflow) as err:  # each message fits, the conversation does not
        parse_messages([{"role": "user", "content": "x" * 9_000}] * 2, max_chars=16_384)
    assert "18,000" in err.value.message and "16,384" in err.value.message
    assert char_limit(2048) == 8 * 2048 and char_limit(None) == char_limit(0) >= 1_000_000
    assert char_limit(10**9) == char_limit(None)  # a huge context is capped (tokenizing it would take minutes)
