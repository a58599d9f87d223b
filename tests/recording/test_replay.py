"""Replay files: replay.wav is stereo with the user left and the assistant right, each chunk at its
start time (different rates resampled to one); replay.mp4 has a video and an audio stream."""

from __future__ import annotations

import json

import av
import numpy as np
import soundfile

from desktop.media.clock import VirtualClock
from desktop.recording.replay import build_replay
from desktop.recording.writer import SessionRecorder


def tone(seconds: float, freq: float, rate: int) -> np.ndarray:
    n = int(seconds * rate)
    return (0.4 * np.sin(2 * np.pi * freq * np.arange(n) / rate)).astype(np.float32)


def peak_freq(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.fft.rfftfreq(x.size, 1 / rate)[np.argmax(spectrum)])


def onset(x: np.ndarray, rate: int) -> float:
    return float(np.argmax(np.abs(x) > 0.05)) / rate


def recorded(tmp_path, frames: bool = False) -> SessionRecorder:
    rec = SessionRecorder(tmp_path, "call", ai_rate=24000, video=frames, clock=VirtualClock())
    rec.audio("user", [tone(1.5, 440, 16000)], 0.25, 16000)  # 16 kHz chunks, as the microphone gives
    rec.audio("user", [tone(1.0, 440, 16000)], 1.75, 16000)
    rec.audio("ai", [tone(0.5, 1000, 24000), tone(0.5, 1000, 24000)], 1.5, 24000)
    rec.audio("ai", [tone(0.8, 1000, 24000)], 3.0, 24000)
    if frames:
        for i in range(8):
            img = np.zeros((120, 160, 3), np.uint8)
            img[:, : 20 * (i + 1)] = (0, 200, 0)
            rec.frame(img, i * 0.5)
    rec.close().result(10)
    return rec


def test_replay_wav_is_stereo_user_left_ai_right_aligned_by_start(tmp_path):
    rec = recorded(tmp_path)
    steps: list[float] = []
    replay = build_replay(rec.folder, progress=steps.append)
    assert replay.video is None and replay.audio == rec.folder / "replay.wav"
    data, rate = soundfile.read(replay.audio, dtype="float32")
    assert rate == 24000 and data.shape[1] == 2 and abs(data.shape[0] / rate - 3.8) < 0.01
    left, right = data[:, 0], data[:, 1]
    assert abs(onset(left, rate) - 0.25) < 0.002 and abs(onset(right, rate) - 1.5) < 0.002
    assert np.abs(left[int(2.8 * rate):]).max() < 0.01  # the user stopped at 2.75 s
    assert np.abs(right[int(2.55 * rate): int(2.95 * rate)]).max() < 0.01  # the gap between the replies
    assert abs(peak_freq(left[int(0.5 * rate): int(2.5 * rate)], rate) - 440) < 5
    assert abs(peak_freq(right[int(1.6 * rate): int(2.4 * rate)], rate) - 1000) < 5
    assert abs(onset(right[int(2.6 * rate):], rate) + 2.6 - 3.0) < 0.002
    # the two user chunks meet without a gap
    assert np.abs(left[int(1.7 * rate): int(1.8 * rate)]).max() > 0.3
    assert steps == sorted(steps) and steps[-1] == 1.0
    meta = json.loads((rec.folder / "meta.json").read_text())
    assert meta["replay"] == {"audio": "replay.wav", "video": None}


def test_replay_mp4_has_video_and_audio(tmp_path):
    rec = recorded(tmp_path, frames=True)
    replay = build_replay(rec.folder)
    assert replay.video == rec.folder / "replay.mp4"
    with av.open(str(replay.video)) as box:
        video, audio = box.streams.video[0], box.streams.audio[0]
        assert (video.codec_context.width, video.codec_context.height) == (160, 120)
        assert audio.codec_context.channels == 2 and audio.codec_context.sample_rate == 24000
        assert abs(float(box.duration / av.time_base) - 3.8) < 0.15  # the audio is the longer
        pictures = [f.to_ndarray(format="bgr24") for f in box.decode(video=0)]
    assert len(pictures) >= 35
    # the picture at 1.0 s is frame 2 (60 px of green), the one at 3.6 s the last (160 px)
    assert (pictures[10][:, :, 1].mean(axis=0) > 100).sum() in range(55, 66)
    assert (pictures[36][:, :, 1].mean(axis=0) > 100).sum() >= 155
    meta = json.loads((rec.folder / "meta.json").read_text())
    assert meta["replay"] == {"audio": "replay.wav", "video": "replay.mp4"}


def test_a_cancelled_replay_leaves_nothing_half_built(tmp_path):
    rec = recorded(tmp_path, frames=True)

    def progress(f: float) -> None:
        if f > 0.6:  # inside the video
            raise KeyboardInterrupt

    try:
        build_replay(rec.folder, progress=progress)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the cancel did not stop the build")
    assert not list(rec.folder.glob("*.part*")) and not (rec.folder / "replay.mp4").exists()
    assert json.loads((rec.folder / "meta.json").read_text())["replay"] == {"audio": None, "video": None}
