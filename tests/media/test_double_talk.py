"""Double-talk detection on the echo tests' rooms (real espeak speech, the AEC's far-end
reference): the assistant's voice alone never reads as the user; the user on top does, within a
few frames of their first sample — long before the cleaned level rises."""

import numpy as np
import pytest

from desktop.media.double_talk import DoubleTalkDetector
from desktop.media.echo import EchoCanceller, EchoConfig
from desktop.media.frames import FRAME_S, FRAME_SAMPLES, SAMPLE_RATE, level_db
from tests.media.test_echo import USER_AT, call, user_voice

pytestmark = pytest.mark.speech_model
ROOMS = [(30, 0.3), (50, 0.5), (80, 0.6)]


def onset_s(user: np.ndarray) -> float:
    return USER_AT + int(np.argmax(np.abs(user) > 1e-3)) / SAMPLE_RATE


def detections(monkeypatch, delay_ms: float, gain: float, user: np.ndarray | None) -> tuple[list[float], object]:
    """Times (s from the start) of the frames in which the canceller reported near talk."""
    times: list[float] = []
    process = EchoCanceller.process

    def spy(self, near, t):
        out = process(self, near, t)
        if self.near_talk:
            times.append(round(self.blocks * 160 / SAMPLE_RATE - FRAME_S, 3))  # the frame's start
        return out

    monkeypatch.setattr(EchoCanceller, "process", spy)
    return times, call(delay_ms, gain, user=user)


@pytest.mark.parametrize("delay_ms, gain", ROOMS)
def test_the_assistants_own_voice_is_never_the_user(monkeypatch, delay_ms, gain):
    times, c = detections(monkeypatch, delay_ms, gain, None)
    assert times == []
    assert c.aec.double_talk is not None and c.aec.double_talk.detections == 0


@pytest.mark.parametrize("delay_ms, gain", ROOMS)
def test_the_user_over_the_echo_is_seen_within_two_frames(monkeypatch, delay_ms, gain):
    user = user_voice()
    times, c = detections(monkeypatch, delay_ms, gain, user)
    onset = onset_s(user)
    assert times and min(times) >= onset - FRAME_S  # nothing before the user spoke
    first = min(times)
    assert first - onset <= 2 * FRAME_S  # measured: 7 ms
    # The cleaned level alone rises much later: the AEC holds back the start of double talk.
    frames = [k for k in range(0, c.out.size, FRAME_SAMPLES) if level_db(c.out[k : k + FRAME_SAMPLES]) > -45]
    rise = min(k / SAMPLE_RATE for k in frames if k / SAMPLE_RATE >= onset - FRAME_S)
    assert rise - onset > 0.08 > first - onset


def test_a_false_alarm_makes_it_more_careful_for_a_while():
    rng = np.random.default_rng(0)
    det = DoubleTalkDetector(warmup=5)
    far = lambda: rng.normal(0, 0.05, FRAME_SAMPLES).astype(np.float32)  # noqa: E731
    for _ in range(200):  # learn a path of gain 0.5, no delay
        f = far()
        assert not det.feed(0.5 * f, f)
    f = far()
    loud = 0.5 * f + rng.normal(0, 0.1, FRAME_SAMPLES).astype(np.float32)  # +~9 dB over the echo
    assert det.feed(loud, f)
    for _ in range(4):
        det.false_alarm()
    assert not det.feed(0.5 * f + rng.normal(0, 0.1, FRAME_SAMPLES).astype(np.float32), f)


def test_no_reference_no_detector():
    assert EchoCanceller(None).double_talk is None
    assert EchoCanceller(None, config=EchoConfig(double_talk=False)).near_talk is False
