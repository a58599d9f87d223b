"""Issue 19, item 11: images at the API's door. A request with 100 images is refused from the count
alone, without its images being decoded on the event loop (measured by a ticker task: the longest
time the loop went without running it); the images of a request within the limit are decoded on a
thread, never on the loop. A stub gateway that parses its messages as the real one does; no model."""

from __future__ import annotations

import asyncio
import io
import threading
import time

import httpx
import pytest
from PIL import Image

from desktop.api.app import Engine, make_app
from desktop.errors import InvalidRequest
from desktop.model.images import ImageData
from desktop.model.messages import parse_messages
from desktop.model.params import SamplingParams

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(300)]


class ParsingGateway:
    """Parses what it is given (as Gateway.chat does: decoding images it was given as bytes), then
    refuses it so that nothing runs."""

    def __init__(self) -> None:
        self.parsed: list = []

    def context_length(self) -> int:
        return 0

    def chat(self, messages, params, origin="app", **kw):
        self.parsed.append(parse_messages(messages))
        raise InvalidRequest("stub: parsed, not run")


def picture() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (1000, 1000), (10, 200, 30)).save(buf, "PNG")  # 1 MP: tens of ms to decode, each
    return "data:image/png;base64," + __import__("base64").b64encode(buf.getvalue()).decode()


def body(n: int) -> dict:
    url = picture()
    parts = [{"type": "image_url", "image_url": {"url": url}} for _ in range(n)]
    return {"messages": [{"role": "user", "content": [*parts, {"type": "text", "text": "what are these?"}]}]}


async def post_and_watch_the_loop(payload: dict) -> tuple[httpx.Response, float, ParsingGateway]:
    gateway = ParsingGateway()
    app = make_app(lambda: Engine(gateway, "vlm", supports_images=True, defaults=SamplingParams(max_tokens=4)))
    longest, stop = [0.0], asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            longest[0] = max(longest[0], now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        response = await client.post("/v1/chat/completions", json=payload)
    stop.set()
    await tick
    return response, longest[0], gateway


def test_a_hundred_images_are_refused_without_stalling_the_loop():
    payload = body(100)
    response, stall_s, gateway = asyncio.run(post_and_watch_the_loop(payload))
    assert response.status_code == 400 and "holds 100 images; the limit is 16" in response.json()["error"]["message"]
    assert not gateway.parsed
    # decoded on the loop they took seconds (about 50 ms each here); counted, a few milliseconds.
    # The bound is generous for a loaded machine: the body's JSON is still parsed on the loop.
    assert stall_s < 1.0, f"the event loop stood still for {stall_s:.2f} s"


def test_the_images_of_a_request_are_decoded_off_the_loop(monkeypatch):
    threads: list[int] = []
    real = ImageData.from_bytes.__func__

    def recording(cls, data, what="The image"):
        threads.append(threading.get_ident())
        return real(cls, data, what)

    monkeypatch.setattr(ImageData, "from_bytes", classmethod(recording))
    payload = body(16)

    async def main():
        loop_thread = threading.get_ident()
        response, _, gateway = await post_and_watch_the_loop(payload)
        return loop_thread, response, gateway

    loop_thread, response, gateway = asyncio.run(main())
    assert response.status_code == 400 and "stub" in response.json()["error"]["message"]
    assert len(gateway.parsed) == 1 and len(gateway.parsed[0][0].images) == 16  # they reached the gateway, decoded
    assert len(threads) == 16 and loop_thread not in threads
