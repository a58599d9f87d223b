"""The adaptive pre-roll: its policy alone, and the fake speaker on a virtual clock fed by a fake
synthesiser with a set real-time factor (no underrun on a slow one, an earlier start on a fast one)."""

from __future__ import annotations

import numpy as np
import pytest

from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.preroll import AdaptivePreRoll, PreRollConfig

RATE = 16000
REPLY = [1.9, 5.0, 4.0, 3.0, 2.0]  # seconds of audio per chunk: a first clause, then sentences


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(round(seconds * RATE))) / RATE
    return (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def speaker(adaptive: PreRollConfig | None) -> FakeAudioOutput:
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE, pre_roll_ms=120, record=False,
                          high_water_ms=25_000, adaptive=adaptive)  # fmt: skip
    out.start()
    return out


def speak(out: FakeAudioOutput, rid: str, chunks: list[float], rtf: float, *, known: bool = True,
          waits: dict[int, float] | None = None) -> float:
    """One reply, synthesised chunk after chunk at `rtf` (plus `waits[i]` seconds for text before
    chunk i) while the speaker plays on the same clock; returns its first sound after the start.
    `known`: the synthesiser says how long the next chunk is (else the speaker assumes an average chunk)."""
    clock = out.clock
    t0 = clock.now()
    for i, audio_s in enumerate(chunks):
        done = clock.now() + (waits or {}).get(i, 0.0) + rtf * audio_s
        out.pump(done)  # the speaker plays while the chunk is made
        clock.advance_to(done)
        following = chunks[i + 1] if i + 1 < len(chunks) else 0.0
        out.pace(rid, audio_s, rtf * audio_s, following if known or i + 1 == len(chunks) else None)
        out.write(rid, tone(audio_s), RATE)
    out.end(rid)
    clock.advance_to(clock.now() + sum(chunks) + 1.0)
    out.pump()
    return out.first_audio_at(rid) - t0


def test_a_slow_synthesiser_never_runs_the_speaker_dry():
    fixed, adaptive = speaker(None), speaker(PreRollConfig())
    speak(fixed, "r", REPLY, rtf=0.6)
    assert fixed.stats()["underruns"] > 0  # today's 120 ms: the second sentence comes too late
    start = speak(adaptive, "r", REPLY, rtf=0.6)
    assert adaptive.stats()["underruns"] == 0
    assert start > 0.6 * REPLY[0] + 0.5  # it held the start past the first chunk to stay ahead


def test_a_fast_synthesiser_starts_at_its_first_chunk_and_sooner_than_a_slow_one():
    fast, slow = speaker(PreRollConfig()), speaker(PreRollConfig())
    fast_start = speak(fast, "r", REPLY, rtf=0.05)
    slow_start = speak(slow, "r", REPLY, rtf=0.6)
    assert fast_start == pytest.approx(0.05 * REPLY[0], abs=0.021)  # within one 20 ms block
    assert fast_start < slow_start and fast.stats()["underruns"] == 0


def test_text_to_come_not_known_yet_is_assumed_an_average_chunk():
    known, unknown = speaker(PreRollConfig()), speaker(PreRollConfig())
    short = [1.9, 1.0, 1.0]  # shorter than the 3 s assumed before any chunk is seen
    assert speak(known, "r", short, rtf=0.7) < speak(unknown, "r", short, rtf=0.7, known=False)
    assert known.stats()["underruns"] == unknown.stats()["underruns"] == 0


def test_an_underrun_raises_the_pre_roll_and_clean_replies_lower_it_slowly_within_bounds():
    config = PreRollConfig()
    out = speaker(config)
    floor = lambda: out._preroll.floor_s  # noqa: E731
    speak(out, "r0", [1.0, 1.0], rtf=0.05, waits={1: 2.0})  # the text for the second chunk came late
    speak(out, "r1", [0.5], rtf=0.05)  # the next reply's first write looks at the speaker
    assert out.stats()["underruns"] == 1
    raised = floor()
    assert raised > config.start_ms / 1000 and raised <= config.max_ms / 1000
    for i in range(3):
        speak(out, f"c{i}", [0.5], rtf=0.05)
    assert raised - 3 * config.lower_ms / 1000 - 1e-9 <= floor() < raised  # slowly
    for i in range(60):
        speak(out, f"d{i}", [0.5], rtf=0.05)
    assert floor() == pytest.approx(config.min_ms / 1000)


def test_clean_replies_let_a_streaming_synthesiser_start_sooner():
    """Small chunks (espeak makes 100 ms ones): the fixed 120 ms pre-roll waits for three 50 ms
    chunks; once clean replies have lowered the adaptive floor to 40 ms, two are enough."""
    fixed, adaptive = speaker(None), speaker(PreRollConfig())
    stream = [0.05] * 20
    for i in range(12):
        speak(adaptive, f"warm{i}", stream, rtf=0.15)
    late, soon = speak(fixed, "r", stream, rtf=0.15), speak(adaptive, "r", stream, rtf=0.15)
    assert late >= 3 * 0.15 * 0.05 and soon < 3 * 0.15 * 0.05
    assert soon <= late - fixed.block_s + 1e-3  # a whole device block sooner
    assert fixed.stats()["underruns"] == adaptive.stats()["underruns"] == 0


def test_a_recording_played_back_waits_for_the_floor_only():
    out = speaker(PreRollConfig())
    speak(out, "reply", REPLY, rtf=0.6)  # a slow reply left a long lead
    out.write("recording", tone(0.2), RATE)  # nobody paces this one
    assert out.stats()["pre_roll_ms"] == pytest.approx(1000 * out._preroll.floor_s, abs=0.1)


def test_policy_lead_follows_the_real_time_factor():
    pre = AdaptivePreRoll(PreRollConfig(start_ms=100, margin=1.0))
    assert pre.lead_s(5.0) == pytest.approx(0.1)  # nothing measured yet: the floor
    pre.measured(2.0, 0.2)  # RTF 0.1
    assert pre.lead_s(5.0) == pytest.approx(0.1 + 0.5)
    pre.measured(2.0, 1.0)  # slower at once: believed at once
    assert pre.rtf == pytest.approx(0.5)
    pre.measured(2.0, 0.2)  # faster again: only gradually
    assert 0.1 < pre.rtf < 0.5


@pytest.mark.parametrize("kwargs", [dict(min_ms=50, start_ms=40), dict(start_ms=500), dict(margin=0.5),
                                    dict(unknown_s=0), dict(rtf_weight=0)])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        PreRollConfig(**kwargs)


def test_only_the_deficit_is_waited_not_the_whole_next_chunk():
    out = speaker(PreRollConfig())
    chunks, rtf = [1.9, 3.0], 0.6
    start = speak(out, "r", chunks, rtf=rtf)
    written = rtf * chunks[0]
    lead = out._preroll.floor_s + out._preroll.config.margin * rtf * chunks[1]
    assert out.stats()["underruns"] == 0
    assert written + (lead - chunks[0]) - out.block_s <= start < written + rtf * chunks[1]  # before chunk 2


def test_jitter_buffer_credits_the_time_audio_waited_from_the_gates_last_move():
    from desktop.media.jitter import JitterBuffer

    jb = JitterBuffer(1000, pre_roll_ms=100, credit_wait=True)  # 1 sample per ms
    assert jb.read_into(np.zeros(20, np.float32)) == 0  # nothing buffered: waiting earns nothing
    jb.write(np.ones(50, np.float32))
    assert [jb.read_into(np.zeros(20, np.float32)) for _ in range(3)] == [0, 0, 0]  # 50 + 40 < 100
    jb.set_pre_roll(100)  # the gate moved: what was waited no longer counts
    assert [jb.read_into(np.zeros(20, np.float32)) for _ in range(3)] == [0, 0, 0]
    assert jb.read_into(np.zeros(20, np.float32)) == 20  # 50 buffered + 60 waited >= 100
    strict = JitterBuffer(1000, pre_roll_ms=100)  # today's gate: buffered audio only
    strict.write(np.ones(50, np.float32))
    assert all(strict.read_into(np.zeros(20, np.float32)) == 0 for _ in range(20))
