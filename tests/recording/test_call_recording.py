"""A recorded voice call on a virtual clock (the fakes of tests/call/test_call.py, the tiny model,
espeak into the fake speaker): the raw microphone and what the speaker played become the two
tracks, the call's text, barge-in and metrics the timeline. With a disk that fills up mid-call,
one warning is given and the call goes on to its next turn."""

from __future__ import annotations


import numpy as np
import pytest
import soundfile
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig, pump_frames, spoken_ids, until_heard
from gw_helpers import run
from helpers import FullDisk

from desktop.call.call import Call
from desktop.call.video import VideoFeed
from desktop.media.camera import VideoFrame
from desktop.call.state import CallPhase
from desktop.media.clock import VirtualClock
from desktop.model.params import SamplingParams
from desktop.recording.call_hook import CallRecording
from desktop.recording.library import scan
from desktop.recording.reader import open_recording
from desktop.recording.replay import build_replay, read_timeline
from desktop.recording.writer import SessionRecorder

class Camera:
    """A camera on the test's clock: a new 64×48 frame each time it is asked."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock, self.index = clock, -1

    def latest(self) -> VideoFrame:
        self.index += 1
        return VideoFrame(np.full((48, 64, 3), (self.index * 40) % 255, np.uint8), self.clock.now(), self.index)


@pytest.mark.parametrize("disk", ["fine", "full"])
def test_a_recorded_call(tmp_path, disk):
    warnings: list[str] = []

    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        spoken = spoken_ids(voice)
        mic = ScriptedMic(clock)
        video = VideoFeed(Camera(clock), rate_hz=1.0)
        video.on, video.send = True, False  # the camera is on; the tiny model cannot see images
        call = Call(gw, mic, voice, EnergyDetector(), ScriptedTranscriber(["Tell me a story.", "Stop, another one."]),
                    clock=clock, params=SamplingParams(max_tokens=40, ignore_eos=True), video=video)
        rec = SessionRecorder(tmp_path, "call", clock=clock, ai_rate=16000, on_warning=warnings.append,
                              disk=FullDisk(room=6) if disk == "full" else None)
        recording = CallRecording(rec)
        recording.attach(call, speaker)
        holds = rec.pool.gate.holds
        await call.start()

        async def frames(n: int, loud: bool) -> None:
            await pump_frames(clock, mic, speaker, call, n, loud)

        async def until(cond, limit: int = 1500) -> None:
            for _ in range(limit):
                if cond():
                    return
                await frames(1, False)
            raise AssertionError(f"timed out at {call.phase}")

        await frames(25, True)
        await until(lambda: call.phase is CallPhase.SPEAKING)
        await frames(40, False)
        await until_heard(voice, spoken, frames)  # at least a word of it, whatever the load
        await frames(5, True)  # barge-in
        first = call.turns[0]
        for _ in range(400):
            if first.heard is not None:
                break
            await frames(1, True)
        await frames(10, False)
        await until(lambda: call.phase is CallPhase.SPEAKING)
        second = call.turns[1]
        await until(lambda: second.ttft_ms is not None)  # its first audio can come before the reply's Done
        assert second.user_text == "Stop, another one." and second.cached_tokens > 0  # the call went on
        await until(lambda: call.phase is CallPhase.LISTENING)
        await call.end()
        done = recording.finish().result(10)
        assert done is rec and mic.closed
        assert not call.frame_taps and recording.on_event not in call.listeners and not video.taps  # detached
        assert recording.on_played not in speaker.on_played
        assert rec.pool.gate.holds - holds >= 2 and not rec.pool.gate.held  # each reply on its way held the writes
        await gw.close()
        voice.close()
        speaker.close()
        return rec, first

    rec, first = run(main(), timeout=120)
    events = read_timeline(rec.folder)
    if disk == "full":
        assert len(warnings) == 1 and "disk is full" in warnings[0]
        assert sum(e["kind"] == "audio" for e in events) <= 6
        return
    assert warnings == []
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "end" and {"user_partial", "assistant_delta", "turn_metrics", "audio"} <= set(kinds)
    said = [(e["turn"], e["text"]) for e in events if e["kind"] == "user_text"]
    assert said == [(1, "Tell me a story."), (2, "Stop, another one.")]
    deltas = "".join(e["text"] for e in events if e["kind"] == "assistant_delta" and e["turn"] == 1)
    assert deltas == first.assistant_text and first.heard
    assert [e["heard"] for e in events if e["kind"] == "barge_in"] == [first.heard]
    answers = {e["turn"]: e for e in events if e["kind"] == "assistant_text"}
    assert answers[1]["heard"] == first.heard and answers[1]["text"] == first.assistant_text and 2 in answers
    assert [e["kind"] for e in events].count("assistant_text") == 2  # once per turn
    metrics = [e for e in events if e["kind"] == "turn_metrics" and e["turn"] == 1]
    assert metrics and metrics[-1]["ttft_ms"] > 0 and metrics[-1]["eos_to_audio_ms"] > 0  # the last one is whole
    user = [e for e in events if e["kind"] == "audio" and e["track"] == "user"]
    ai = [e for e in events if e["kind"] == "audio" and e["track"] == "ai"]
    end_t = events[-1]["t"]
    assert abs(sum(e["duration"] for e in user) - end_t) < 0.1  # the microphone, all of it
    assert ai and {e["rate"] for e in ai} == {16000}
    reply_start = rec.at(first.first_audio_t)  # clock time → session seconds
    assert abs(ai[0]["start"] - reply_start) <= 0.05  # the speaker's first chunk begins with the reply
    frames = [e for e in events if e["kind"] == "frame"]
    assert len(frames) >= 2 and all((rec.folder / e["file"]).is_file() for e in frames)  # 1 a second
    assert all(b["start"] - a["start"] >= 0.99 for a, b in zip(frames, frames[1:]))
    replay = build_replay(rec.folder)
    assert replay.video is not None and replay.video.is_file()  # a video call: replay.mp4 too
    data, rate = soundfile.read(replay.audio, dtype="float32")
    loud_user = np.abs(data[: int(0.5 * rate), 0]).max()
    assert loud_user > 0.1 and np.abs(data[: int(0.5 * rate), 1]).max() == 0  # left: the user's speech first
    a0 = int(ai[0]["start"] * rate)
    assert np.abs(data[a0: a0 + int(0.5 * rate), 1]).max() > 0.01  # right: the reply
    # What the recorder wrote, read back by the viewer's side (format v1 on both ends).
    opened = open_recording(rec.folder)
    assert opened.problems == [] and [t.user_text for t in opened.turns] == ["Tell me a story.", "Stop, another one."]
    assert opened.turns[0].heard == first.heard and opened.turns[0].barge_in_t is not None
    assert opened.turns[0].assistant_text == first.assistant_text and opened.turns[0].metrics["ttft_ms"] > 0
    assert len(opened.frames) == len(frames) and opened.user.duration == pytest.approx(end_t, abs=0.1)
    (listed,) = scan(tmp_path)
    assert listed.kind == "call" and listed.first_words == "Tell me a story." and listed.video and listed.complete
