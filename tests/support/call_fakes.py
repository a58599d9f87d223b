"""Fakes for a Call on a virtual clock (tests/call/test_call.py, tests/recording): scripted
microphone frames, an energy voice-activity detector and a scripted transcriber."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from desktop.media.clock import VirtualClock

RATE, FRAME = 16000, 320
SPEAKER_RATE = 22050


@dataclass
class Frames:
    samples: np.ndarray
    times: np.ndarray
    levels: np.ndarray

    def __len__(self) -> int:
        return len(self.times)


class ScriptedMic:
    """Frames pushed by the test, stamped with the virtual clock's time."""

    sample_rate = RATE

    def __init__(self, clock: VirtualClock) -> None:
        self.clock, self.pending, self.closed = clock, [], False

    def start(self) -> None:
        pass

    def push(self, loud: bool) -> None:
        x = (np.random.default_rng(len(self.pending)).standard_normal(FRAME) * (0.3 if loud else 0.0)).astype(np.float32)
        self.pending.append((x, self.clock.now()))

    def read(self, max_frames=None, timeout: float = 0.0) -> Frames:
        got, self.pending = self.pending, []
        if not got:
            return Frames(np.zeros((0, FRAME), np.float32), np.zeros(0), np.zeros(0, np.float32))
        return Frames(np.stack([g[0] for g in got]), np.array([g[1] for g in got]),
                      np.array([-10.0 if np.any(g[0]) else -100.0 for g in got], np.float32))

    def close(self) -> None:
        self.closed = True


class EnergyDetector:
    """Speech = a frame with energy; the end after `hang` quiet frames."""

    def __init__(self, hang: int = 10) -> None:
        self.hang, self.speaking, self.quiet, self.last = hang, False, 0, 0.0
        self.voiced = False

    def feed(self, samples, t):
        self.voiced = bool(np.any(samples))
        if self.voiced:
            self.quiet, self.last = 0, t + FRAME / RATE
            if not self.speaking:
                self.speaking = True
                return [("start", t)]
        elif self.speaking:
            self.quiet += 1
            if self.quiet >= self.hang:
                self.speaking = False
                return [("end", self.last)]
        return []

    def reset(self) -> None:
        self.speaking = False


class ScriptedTranscriber:
    def __init__(self, texts: list[str]) -> None:
        self.texts, self.began, self.fed = list(texts), 0, 0

    def begin(self, pre_roll, on_partial) -> None:
        self.began += 1
        on_partial("…")

    def feed(self, samples, voiced) -> None:
        self.fed += samples.size

    def finish(self, on_text) -> None:
        text = self.texts.pop(0)
        threading.Thread(target=on_text, args=(text, 12.5)).start()

    def cancel(self) -> None:
        pass


async def call_rig(clock: VirtualClock):
    """The real pieces of a test call on `clock`: the fake speaker (started), the Voice speaking
    espeak into it, and a started gateway over the tiny model on a thread host."""
    from desktop.gateway.gateway import Gateway
    from desktop.speech.voice import Voice
    from desktop.media.fake_audio import FakeAudioOutput
    from desktop.model.loader import ModelSpec
    from desktop.model.tts import EspeakTTS
    from desktop.workers.config import WorkerConfig
    from desktop.workers.thread_host import ThreadHost

    speaker = FakeAudioOutput(clock, device_rate=SPEAKER_RATE, pre_roll_ms=40)
    speaker.start()
    voice = Voice(lambda: EspeakTTS(rate_wpm=260), speaker, clock=clock)
    gw = Gateway([ThreadHost("t0", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1)])
    await gw.start()
    assert await gw.wait_ready(timeout=60)
    return speaker, voice, gw


async def pump_frames(clock: VirtualClock, mic: ScriptedMic, speaker, call, n: int, loud: bool) -> None:
    """n microphone frames (loud: speech) through a test call, the clock moved a frame each; the
    gateway, worker and voice threads run in real time meanwhile."""
    import asyncio

    for _ in range(n):
        mic.push(loud)
        clock.advance(FRAME / RATE)
        speaker.pump()
        call.pump()
        await asyncio.sleep(0.002)


def spoken_ids(voice) -> list[str]:
    """Request ids the Voice is asked to speak, in order (its speak_begin, wrapped)."""
    ids: list[str] = []
    begin = voice.speak_begin

    def speak_begin(request_id: str) -> None:
        ids.append(request_id)
        begin(request_id)

    voice.speak_begin = speak_begin
    return ids


async def until_heard(voice, ids: list[str], frames, limit: int = 1500) -> None:
    """Pump quiet frames until the speaker has played at least one whole word of the latest
    reply: the TTS and the speaker run on real threads, and under load a barge-in made after a
    fixed number of frames could land before any word was heard (an empty 'heard')."""
    for _ in range(limit):
        if ids and voice.heard(ids[-1]):
            return
        await frames(1, False)
    raise AssertionError("the reply was never heard")


async def until_phase(call, phase, frames, limit: int = 1500, events=()) -> None:
    """Pump quiet frames until the call is in `phase` (the last events, if given, in the error)."""
    for _ in range(limit):
        if call.phase is phase:
            return
        await frames(1, False)
    raise AssertionError(f"never {phase}; at {call.phase}; events {[e.kind for e in events][-20:]}")
