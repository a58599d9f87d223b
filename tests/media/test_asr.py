"""Whisper tiny.en on real (espeak) speech: word error rate, empty audio, clear errors; the word
error rate itself; PartialTranscriber's scheduling on a fake ASR and live on the real one."""

import threading
import time

import numpy as np
import pytest
import soxr

from desktop.errors import OmnideskError
from desktop.media.asr import ASRUnavailable, Transcript, WhisperASR
from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE
from desktop.media.partials import PartialTranscriber
from desktop.media.vad import SileroVAD, SpeechEnd
from desktop.media.wer import word_error_rate, words
from desktop.model.tts import EspeakTTS

SENTENCES = [
    "Could you tell me what the weather will be like tomorrow morning in Paris?",
    "Please remind me to call my sister this evening, and also buy some milk on the way home.",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of Australia?",
]


def say(text: str) -> np.ndarray:
    tts = EspeakTTS()
    audio = np.concatenate(list(tts.synthesize(text)))
    return soxr.resample(audio, tts.sample_rate, SAMPLE_RATE).astype(np.float32)


@pytest.fixture(scope="module")
def asr() -> WhisperASR:
    return WhisperASR(threads=2)


# ---- word error rate ---------------------------------------------------------------------------
def test_word_error_rate():
    assert words("Hello, World! It's o'clock.") == ["hello", "world", "it's", "o'clock"]
    assert word_error_rate("the cat sat", "The cat sat.") == 0.0
    assert word_error_rate("the cat sat", "the cat") == pytest.approx(1 / 3)  # deletion
    assert word_error_rate("the cat sat", "the bat sat down") == pytest.approx(2 / 3)  # sub + ins
    assert word_error_rate("a b c d", "") == 1.0
    assert word_error_rate("", "") == 0.0 and word_error_rate("", "noise") == 1.0


# ---- one-shot ASR --------------------------------------------------------------------------------
@pytest.mark.speech_model
def test_transcribes_espeak_sentences_with_low_wer(asr):
    errors = total = 0.0
    for text in SENTENCES:
        result = asr.transcribe(say(text))
        n = len(words(text))
        errors += word_error_rate(text, result.text) * n
        total += n
        assert result.ms > 0 and result.audio_s > 1.0
    # Measured: 2 errors in 47 words (0.04: "jumps" → "jump", "dog" → "nog"; espeak is robotic).
    assert errors / total <= 0.15, f"WER {errors / total:.2f}"


@pytest.mark.speech_model
def test_empty_and_silent_audio(asr):
    assert asr.transcribe(np.zeros(0, np.float32)) == Transcript("", 0.0, 0.0)
    # Whisper can hallucinate on silence ("you", "Thank you."); with these settings it does not.
    quiet = np.random.default_rng(0).normal(0, 0.003, 2 * SAMPLE_RATE).astype(np.float32)
    assert asr.transcribe(quiet).text == ""


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ASRUnavailable, match="No CTranslate2 Whisper model") as info:
        WhisperASR(tmp_path)
    assert isinstance(info.value, OmnideskError) and info.value.code == "asr_unavailable"
    with pytest.raises(ASRUnavailable, match="Unknown ASR device"):
        WhisperASR(device="tpu")


# ---- PartialTranscriber on a fake ASR ------------------------------------------------------------
class GatedASR:
    """Returns the audio length as text; each pass waits until the test lets it finish."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.gate = threading.Semaphore(0)
        self.started = threading.Semaphore(0)
        self.fail = False

    def transcribe(self, audio: np.ndarray) -> Transcript:
        self.calls.append(audio.size)
        self.started.release()
        assert self.gate.acquire(timeout=5)
        if self.fail:
            raise RuntimeError("boom")
        return Transcript(f"n={audio.size}", 1.0, audio.size / SAMPLE_RATE)


def feed(pt: PartialTranscriber, seconds: float, voiced: bool) -> None:
    for _ in range(int(round(seconds * SAMPLE_RATE / FRAME_SAMPLES))):
        pt.feed(np.full(FRAME_SAMPLES, 0.1, np.float32), voiced=voiced)


def test_partials_one_in_flight_and_newest_audio_wins():
    asr, got = GatedASR(), []
    pt = PartialTranscriber(asr, interval_ms=500, on_partial=got.append)
    feed(pt, 0.5, True)  # first request at 0.5 s
    assert asr.started.acquire(timeout=5) and asr.calls == [8000]
    feed(pt, 1.6, True)  # requests at 1.0 and 1.5 s wait behind the running pass; 2.0 s replaces them
    assert asr.calls == [8000]
    asr.gate.release()
    assert asr.started.acquire(timeout=5)
    assert asr.calls == [8000, 32000]  # the 1.0 and 1.5 s requests were skipped
    asr.gate.release()
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [p.text for p in got] == ["n=8000", "n=32000"] and pt.partial == "n=32000"
    assert got[1].audio_s == 2.0
    pt.close()


def test_pause_starts_the_final_pass_and_final_reuses_it():
    asr = GatedASR()
    pt = PartialTranscriber(asr, interval_ms=10_000, tail_ms=200)
    feed(pt, 1.0, True)
    assert asr.calls == []  # under the interval: no pass yet
    feed(pt, 0.02, False)  # the pause begins
    assert asr.started.acquire(timeout=5) and asr.calls == [16000 + FRAME_SAMPLES]
    feed(pt, 0.6, False)  # the rest of the end-of-turn silence adds nothing
    asr.gate.release()
    assert pt.final().text == f"n={16000 + FRAME_SAMPLES}"
    assert pt.final_reused and asr.calls == [16000 + FRAME_SAMPLES] and pt.passes == 1
    pt.close()


def test_final_runs_a_new_pass_when_speech_came_after_the_last_one():
    asr = GatedASR()
    pt = PartialTranscriber(asr, interval_ms=500, tail_ms=200)
    feed(pt, 0.5, True)
    assert asr.started.acquire(timeout=5)
    feed(pt, 0.3, True)
    feed(pt, 1.0, False)
    asr.gate.release()
    asr.gate.release()  # for the final pass
    result = pt.final()
    # The pause pass (requested while the first ran) covers all speech and the pause's first frame.
    assert result.text == f"n={int(0.8 * SAMPLE_RATE) + FRAME_SAMPLES}" and pt.final_reused
    assert asr.calls == [8000, 12800 + FRAME_SAMPLES]
    feed(pt, 0.3, True)  # 300 ms more speech (under the interval) after a 1 s pause
    asr.gate.release()
    assert pt.final().text == f"n={int(2.1 * SAMPLE_RATE)}" and not pt.final_reused
    assert len(asr.calls) == 3
    pt.close()


def test_reset_ignores_the_stale_pass_and_errors_reach_final():
    asr = GatedASR()
    pt = PartialTranscriber(asr, interval_ms=500)
    feed(pt, 0.5, True)
    assert asr.started.acquire(timeout=5)
    pt.reset()
    assert pt.final().text == "" and pt.final_wait_ms == 0.0  # nothing voiced since the reset
    asr.gate.release()
    time.sleep(0.05)
    assert pt.partial == "" and pt.passes == 0
    asr.fail = True
    feed(pt, 0.3, True)
    asr.gate.release()
    with pytest.raises(RuntimeError, match="boom"):
        pt.final(timeout=5)
    pt.close()


# ---- PartialTranscriber live on Whisper ----------------------------------------------------------
@pytest.mark.speech_model
def test_partials_while_talking_then_final_text(asr):
    """A ≈3 s utterance fed at real-time pace with the real VAD: partials arrive while it plays,
    and the final text (ready at SpeechEnd) matches a one-shot transcription."""
    text = SENTENCES[0]
    speech = say(text)
    assert 2.5 < speech.size / SAMPLE_RATE < 4.0
    sig = np.concatenate([np.zeros(4800, np.float32), speech, np.zeros(16000, np.float32)])
    one_shot = asr.transcribe(speech)
    vad, partials = SileroVAD(), []
    pt = PartialTranscriber(asr, on_partial=lambda p: partials.append((time.perf_counter(), p)))
    t0 = time.perf_counter()
    end = None
    for i in range(0, sig.size - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        time.sleep(max(0.0, t0 + (i + FRAME_SAMPLES) / SAMPLE_RATE - time.perf_counter()))
        frame = sig[i : i + FRAME_SAMPLES]
        events = vad.process(frame, i / SAMPLE_RATE)
        pt.feed(frame, voiced=vad.in_speech and vad.voiced)
        end = next((e for e in events if isinstance(e, SpeechEnd)), None)
        if end is not None:
            break
    assert end is not None
    final = pt.final()
    speech_end = t0 + end.t  # real time of the last voiced sample
    early = [p for t, p in partials if t < speech_end]
    assert early, "no partial before the end of speech"
    assert word_error_rate(text, early[-1].text) < 1.0  # a real, if incomplete, transcript
    assert word_error_rate(one_shot.text, final.text) <= 0.1, (one_shot.text, final.text)
    assert word_error_rate(text, final.text) <= 0.15
    pt.close()
