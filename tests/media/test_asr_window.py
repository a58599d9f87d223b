"""Whisper's encoder window cut to the utterance: its size, the same text as the full 30 s window
on TTS speech (espeak and Piper), nothing lost at the window's end on a long utterance."""

import numpy as np
import pytest
import soxr

from desktop.media.asr import FRAMES_PER_S, MARGIN_S, MIN_WINDOW_S, WINDOW_S, WhisperASR, window_frames
from desktop.media.frames import SAMPLE_RATE
from desktop.media.wer import word_error_rate, words
from desktop.model.tts import EspeakTTS, PiperTTS

SENTENCES = ["What is the capital of France?", "How do I say thank you in French?",
             "Tell me something about the history of that city."]  # fmt: skip
LONG = ("Please remind me to call my sister this evening. Then book a table for four people at "
        "the Italian restaurant near the station. After that, play some quiet music and turn "
        "off the lights in the kitchen. And wake me up at seven tomorrow morning, please.")  # fmt: skip


def say(tts, text: str) -> np.ndarray:
    audio = np.concatenate(list(tts.synthesize(text)))
    speech = soxr.resample(audio, tts.sample_rate, SAMPLE_RATE).astype(np.float32)
    return np.concatenate([speech, np.zeros(SAMPLE_RATE // 5, np.float32)])  # the 200 ms tail


@pytest.fixture(scope="module")
def cut() -> WhisperASR:
    return WhisperASR(threads=2, workers=1)


@pytest.fixture(scope="module")
def full() -> WhisperASR:
    return WhisperASR(threads=2, workers=1, min_window_s=None)


def test_window_size():
    assert window_frames(1.0) == MIN_WINDOW_S * FRAMES_PER_S  # short speech: the shortest window
    assert window_frames(14.2) == (15 + MARGIN_S) * FRAMES_PER_S  # rounded up, with the margin
    assert window_frames(WINDOW_S - MARGIN_S) is None  # no room left: Whisper's own window
    assert window_frames(40.0) is None and window_frames(1.0, None) is None
    assert window_frames(3.0, 5.0) == 5 * FRAMES_PER_S
    assert all(window_frames(s / 10) % 2 == 0 for s in range(0, 300) if window_frames(s / 10))


@pytest.mark.speech_model
def test_cut_window_gives_the_full_windows_text(cut, full):
    said, heard_cut, heard_full = [], [], []
    for tts in (EspeakTTS(voice="en-us", rate_wpm=165), PiperTTS()):
        for text in SENTENCES:
            audio = say(tts, text)
            said.append(text)
            heard_cut.append(cut.transcribe(audio).text)
            heard_full.append(full.transcribe(audio).text)
    wer_cut, wer_full = (word_error_rate(" ".join(said), " ".join(h)) for h in (heard_cut, heard_full))
    # Measured: the same text for all six (espeak's third: "about my history on that city" in both).
    assert word_error_rate(" ".join(heard_full), " ".join(heard_cut)) <= 0.1, (heard_full, heard_cut)
    assert wer_cut <= wer_full + 0.05, (wer_cut, wer_full)


@pytest.mark.speech_model
def test_nothing_lost_at_the_end_of_a_long_window(cut, full):
    audio = say(PiperTTS(), LONG)
    seconds = audio.size / SAMPLE_RATE
    assert MIN_WINDOW_S - MARGIN_S < seconds < WINDOW_S - MARGIN_S  # the window is the audio + margin
    text = cut.transcribe(audio).text
    assert words(text)[-3:] == words(LONG)[-3:], text  # the last words, near the window's end
    assert word_error_rate(full.transcribe(audio).text, text) <= 0.1
    assert word_error_rate(LONG, text) <= 0.1


@pytest.mark.speech_model
def test_two_passes_at_once_each_get_their_own_window():
    """Two workers run two calls together; each call's window is its own (per thread)."""
    import threading

    both = WhisperASR(threads=1, workers=2)
    tts = EspeakTTS(voice="en-us", rate_wpm=165)
    short, long = say(tts, SENTENCES[0]), say(tts, LONG)  # windows of 10 s and 16 s
    alone = [both.transcribe(a).text for a in (short, long)]
    assert words(alone[1])[-3:] == words(LONG)[-3:]
    together: dict[int, str] = {}
    threads = [threading.Thread(target=lambda k=k, a=a: together.__setitem__(k, both.transcribe(a).text))
               for k, a in enumerate((short, long))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [together.get(0), together.get(1)] == alone
