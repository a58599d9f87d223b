"""Issue 19, items 4, 11 and 12 (images): an image path that is a pipe or a device is refused
without blocking or reading it; the header's pixel size and shape are checked before any pixel is
decoded (a bomb is "too large", not "not an image"); a request's images are counted before any
is decoded; a model folder's huge config.json is refused unread, a pipe as a model path at once."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from PIL import Image

from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model import images as images_module
from desktop.model.images import MAX_IMAGES, ImageData, read_image
from desktop.model.messages import parse_messages

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]


def png(size=(8, 8), color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims width × height pixels (its pixel data is a few bytes: never decodable)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")


def finishes(fn, timeout: float = 10.0):
    """Run fn on a daemon thread; (finished in time, its result or exception)."""
    out: list = []

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return (not t.is_alive()), (out[0] if out else None)


def release_fifo(path: Path) -> None:
    """Open the pipe for writing and close it, so that a reader blocked on it (old code) ends."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_a_fifo_as_an_image_path_is_refused_at_once(tmp_path):
    fifo = tmp_path / "photo.png"
    os.mkfifo(fifo)
    try:
        done, result = finishes(lambda: read_image(fifo))
    finally:
        release_fifo(fifo)
    assert done, "read_image blocked on a pipe"
    assert isinstance(result, InvalidRequest) and "not an image file" in result.message


def test_dev_zero_as_an_image_is_refused_without_reading_it():
    """In a child process capped at 1 GB of memory: reading /dev/zero to its end would fail there."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from desktop.errors import InvalidRequest\nfrom desktop.model.images import read_image\n"
            "try:\n    read_image('/dev/zero')\nexcept InvalidRequest as exc:\n    print('REFUSED', exc.message)\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert "REFUSED" in out.stdout and "not an image file" in out.stdout, out.stderr[-2000:]
    assert time.monotonic() - started < 90


def test_a_decompression_bomb_is_refused_as_too_large_not_as_not_an_image():
    with pytest.raises(InvalidRequest, match="900 megapixels; the limit is 40 megapixels"):
        ImageData.from_bytes(png_header(30_000, 30_000))


def test_a_long_thin_strip_is_refused_from_its_header():
    """20 × 2,000,000 pixels is within the pixel limit, but no model can use it and decoding and
    resizing it costs seconds: refused by its shape, before its pixels are decoded."""
    with pytest.raises(InvalidRequest, match="times longer than wide; the limit is 50 to 1"):
        ImageData.from_bytes(png_header(20, 2_000_000))
    assert ImageData.from_bytes(png((400, 20))).width == 400  # a 20:1 panorama is fine


def test_a_hundred_images_are_counted_before_any_is_decoded(monkeypatch):
    decoded: list[int] = []
    real = ImageData.from_bytes.__func__

    def counting(cls, data, what="The image"):
        decoded.append(1)
        return real(cls, data, what)

    monkeypatch.setattr(ImageData, "from_bytes", classmethod(counting))
    url = ImageData.from_bytes(png()).data_url()
    decoded.clear()
    parts = [{"type": "image_url", "image_url": {"url": url}} for _ in range(100)]
    with pytest.raises(InvalidRequest, match=f"holds 100 images; the limit is {MAX_IMAGES}"):
        parse_messages([{"role": "user", "content": [*parts, {"type": "text", "text": "look"}]}])
    assert decoded == []


def test_a_file_path_is_never_read_from_a_request(tmp_path):
    """Paths are the image store's business (chat/image_store.py); the gateway's door reads none,
    so an API client cannot make the app read a local file."""
    path = tmp_path / "secret.png"
    path.write_bytes(png())
    with pytest.raises(InvalidRequest, match="file path"):
        parse_messages([{"role": "user", "content": [{"type": "image", "path": str(path)}]}])


def test_a_huge_model_config_is_refused_unread(tmp_path):
    from desktop.model.loader import ModelSpec, load_model

    folder = tmp_path / "model"
    folder.mkdir()
    with open(folder / "config.json", "wb") as f:  # 1 GB, sparse: costs no disk
        f.truncate(1 << 30)
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="larger than the 4 MB limit"):
        load_model(ModelSpec(str(folder)))


def test_a_fifo_as_a_model_path_is_refused_at_once(tmp_path):
    from desktop.model.loader import ModelSpec, load_model

    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    try:
        done, result = finishes(lambda: load_model(ModelSpec(str(fifo))), timeout=60)
    finally:
        release_fifo(fifo)
    assert done, "the load blocked on a pipe"
    assert isinstance(result, ModelLoadError) and "device or a pipe" in result.message


def test_reads_of_regular_images_still_work(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(png())
    assert read_image(path).sha256 == ImageData.from_bytes(png()).sha256
    assert images_module.check_dimensions(100, 100) is None
