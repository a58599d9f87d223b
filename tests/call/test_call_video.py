"""A video call's frames reach a vision model through the call's session (issue 11, part 4): the
camera's JPEG frames as image parts of the user's turn, on the real gateway over the tiny VLM on a
thread host; the image is encoded once and stays in the session's KV, so the next turn extends it."""

from __future__ import annotations

import numpy as np
from gw_helpers import run

from desktop.call.video import VideoFeed, user_content
from desktop.gateway.gateway import Gateway
from desktop.media.camera import VideoFrame
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.protocol import Done
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost


class Camera:
    def __init__(self) -> None:
        self.index = -1

    def latest(self) -> VideoFrame:
        self.index += 1
        image = np.zeros((120, 160, 3), np.uint8)
        image[:, : 40 + 10 * self.index] = (30, 140, 220)  # each frame a little different
        return VideoFrame(image, float(self.index), self.index)


async def drain(stream) -> Done:
    last = None
    async for event in stream:
        last = event
    assert isinstance(last, Done), last
    return last


def test_camera_frames_go_into_the_call_session_and_stay_cached():
    async def main() -> None:
        gw = Gateway([ThreadHost("t0", ModelSpec("tiny-vlm"), WorkerConfig(num_slots=2), threads=1)])
        await gw.start()
        assert await gw.wait_ready(timeout=120)
        try:
            feed = VideoFeed(Camera(), rate_hz=1.0, per_turn=2)
            feed.on = True
            for second in range(3):
                feed.tick(float(second))
            frames = feed.take()
            assert len(frames) == 2 and feed.sent == 2
            sid = await gw.create_session("You see the user's camera.", call=True)
            params = SamplingParams(max_tokens=4, temperature=0.0)
            await drain(gw.append_input(sid, [{"role": "user", "content": user_content("What do you see?", frames)}]))
            first = await drain(gw.generate_stream(sid, params))
            await drain(gw.append_input(sid, [{"role": "user", "content": user_content("And now?", feed.take())}]))
            second = await drain(gw.generate_stream(sid, params))
            # the second turn reads the first turn's images from the KV: everything before it is cached
            assert second.stats.cached_tokens >= first.stats.input_tokens
            await gw.end_session(sid)
        finally:
            await gw.close()

    run(main(), timeout=180)
