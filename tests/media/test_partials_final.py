"""PartialTranscriber's final lane (fake ASR): the pause pass never queues behind a partial pass,
the final reuses it or extends it when speech came after it, and an older pass finishing late
is neither the final text nor reported as a partial."""

import threading
import time

import numpy as np

from desktop.media.asr import Transcript
from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE
from desktop.media.partials import PartialTranscriber


class TwoWorkerASR:
    """Two passes can run at once (like WhisperASR(workers=2)); each waits for its own gate,
    opened by the audio length it covers, and returns that length as text."""

    workers = 2

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.started = threading.Semaphore(0)
        self.gates: dict[int, threading.Event] = {}
        self.lock = threading.Lock()

    def gate(self, n: int) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(n, threading.Event())

    def transcribe(self, audio: np.ndarray) -> Transcript:
        with self.lock:
            self.calls.append(audio.size)
        self.started.release()
        assert self.gate(audio.size).wait(timeout=5)
        return Transcript(f"n={audio.size}", 1.0, audio.size / SAMPLE_RATE)


def feed(pt: PartialTranscriber, seconds: float, voiced: bool) -> None:
    for _ in range(int(round(seconds * SAMPLE_RATE / FRAME_SAMPLES))):
        pt.feed(np.full(FRAME_SAMPLES, 0.1, np.float32), voiced=voiced)


def final_in_thread(pt: PartialTranscriber) -> tuple[threading.Thread, list[Transcript]]:
    got: list[Transcript] = []
    thread = threading.Thread(target=lambda: got.append(pt.final(timeout=5)), daemon=True)
    thread.start()
    return thread, got


def test_pause_pass_runs_beside_a_partial_pass_and_the_final_does_not_wait_for_it():
    asr, partials = TwoWorkerASR(), []
    pt = PartialTranscriber(asr, interval_ms=500, tail_ms=200, on_partial=partials.append)
    assert pt.lanes == 2
    feed(pt, 0.5, True)  # a partial pass over 0.5 s starts...
    assert asr.started.acquire(timeout=5) and asr.calls == [8000]
    feed(pt, 0.3, True)
    feed(pt, 0.02, False)  # ...and is still running when the pause begins
    assert asr.started.acquire(timeout=5), "the pause pass waited for the partial pass"
    pause_n = int(0.8 * SAMPLE_RATE) + FRAME_SAMPLES
    assert asr.calls == [8000, pause_n]
    thread, got = final_in_thread(pt)
    asr.gate(pause_n).set()  # the pause pass ends first; the partial pass still runs
    thread.join(timeout=5)
    assert got and got[0].text == f"n={pause_n}" and pt.final_reused
    asr.gate(8000).set()  # the older pass ends late: it changes nothing
    deadline = time.monotonic() + 5
    while pt.passes < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pt.passes == 2 and pt.partial == f"n={pause_n}"
    assert [p.text for p in partials] == [f"n={pause_n}"]  # never reported after the newer one
    pt.close()


def test_final_extends_the_pause_pass_when_speech_resumed():
    asr = TwoWorkerASR()
    pt = PartialTranscriber(asr, interval_ms=10_000, tail_ms=200)
    feed(pt, 0.6, True)
    feed(pt, 0.3, False)  # a pause: its pass covers 0.6 s of speech + the pause's first frame
    assert asr.started.acquire(timeout=5)
    pause_n = int(0.6 * SAMPLE_RATE) + FRAME_SAMPLES
    asr.gate(pause_n).set()
    feed(pt, 0.4, True)  # speech resumes (under the interval: no partial pass)
    end_n = int(1.3 * SAMPLE_RATE)
    asr.gate(end_n).set()
    final = pt.final(timeout=5)  # the turn ends while the user still talks: a new pass over all
    assert final.text == f"n={end_n}" and not pt.final_reused
    assert asr.calls == [pause_n, end_n]
    pt.close()


def test_one_lane_when_the_asr_runs_one_pass_at_a_time():
    class OneWorker(TwoWorkerASR):
        workers = 1

    asr = OneWorker()
    pt = PartialTranscriber(asr, interval_ms=500, tail_ms=200)
    assert pt.lanes == 1 and PartialTranscriber(asr, final_lane=True).lanes == 2
    feed(pt, 0.5, True)
    assert asr.started.acquire(timeout=5)
    feed(pt, 0.3, True)
    feed(pt, 0.02, False)
    assert not asr.started.acquire(timeout=0.2)  # the pause pass queues behind the partial one
    asr.gate(8000).set()
    assert asr.started.acquire(timeout=5)
    pause_n = int(0.8 * SAMPLE_RATE) + FRAME_SAMPLES
    asr.gate(pause_n).set()
    assert pt.final(timeout=5).text == f"n={pause_n}" and pt.final_reused
    pt.close()
