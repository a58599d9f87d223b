"""Smart Turn v3.2, the end-of-turn model (issue 21): its features are Whisper's
(`WhisperFeatureExtractor(chunk_length=8)`, the last 8 s padded at the front), it tells complete
sentences from ones broken off after "so" / "um" / "and" (espeak and Piper speech), it reports
what each call cost, and a missing or broken model is a SmartTurnUnavailable, not a crash."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest

from desktop.errors import OmnideskError
from desktop.media import smart_turn
from desktop.media.paused_speech import make_tts, speak
from desktop.media.smart_turn import WINDOW_S, LogMel, SmartTurn, SmartTurnUnavailable, last_window

RATE = 16000
COMPLETE = ("What is the capital of France?", "Can you book a table for two tonight?")
BROKEN_OFF = ("My favourite colour is blue, so", "I was thinking that we could, um,", "I was thinking, um,")


def test_features_are_whispers_for_the_last_8_s_padded_in_front():
    from transformers import WhisperFeatureExtractor

    rng = np.random.default_rng(0)
    short = (rng.standard_normal(3 * RATE) * 0.1).astype(np.float32)
    long = (rng.standard_normal(11 * RATE) * 0.1).astype(np.float32)
    window = last_window(short)
    assert window.size == WINDOW_S * RATE and not window[: 5 * RATE].any() and np.array_equal(window[5 * RATE :], short)
    assert np.array_equal(last_window(long), long[-WINDOW_S * RATE :])
    fe = WhisperFeatureExtractor(chunk_length=8)
    for audio in (short, long):
        want = fe(last_window(audio), sampling_rate=RATE, return_tensors="np", do_normalize=True).input_features
        got = LogMel()(last_window(audio))
        assert got.shape == want.shape == (1, 80, 800) and got.dtype == np.float32
        assert np.abs(got - want).max() < 1e-4


@pytest.mark.speech_model
@pytest.mark.parametrize("engine,voice", [("espeak", "en-us"), ("piper", None)])
def test_complete_sentences_are_told_from_broken_off_ones(engine, voice):
    tts = make_tts(engine, voice, 1.0)
    model = SmartTurn()
    pad = np.zeros(int(0.2 * RATE), np.float32)  # the VAD's 200 ms of silence after the words
    done = [model.predict(np.concatenate([speak(tts, text), pad])) for text in COMPLETE]
    broken = [model.predict(np.concatenate([speak(tts, text), pad])) for text in BROKEN_OFF]
    # Cutting the user off is the harm: every broken-off sentence waits. A complete one may score
    # lower on another CPU (0.40 for espeak's "capital of France" on CI's, 0.83 here), so the
    # complete ones are asked to stand clearly above the broken-off ones and to pass on average.
    assert not any(v.complete for v in broken), broken
    assert min(v.probability for v in done) - max(v.probability for v in broken) > 0.3, (done, broken)
    assert np.mean([v.probability for v in done]) > 0.5 and any(v.complete for v in done), done
    assert all(v.ms > 0 for v in done + broken) and model.calls == 5 and model.total_ms >= sum(v.ms for v in done)


def test_a_missing_or_broken_model_is_unavailable(tmp_path, monkeypatch):
    assert issubclass(SmartTurnUnavailable, OmnideskError)
    with pytest.raises(SmartTurnUnavailable, match="missing"):
        SmartTurn(tmp_path / "nowhere.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(SmartTurnUnavailable, match="could not be loaded"):
        SmartTurn(junk)

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smart_turn.importlib.metadata, "distribution", absent)
    with pytest.raises(SmartTurnUnavailable, match="pipecat-ai"):
        SmartTurn()


def test_the_model_file_is_found_without_importing_pipecat():
    import sys

    path = smart_turn.model_path()
    assert path.name == "smart-turn-v3.2-cpu.onnx" and path.stat().st_size > 1_000_000
    assert "pipecat" not in sys.modules
