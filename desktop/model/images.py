"""Images in chat messages: checked bytes (PNG, JPEG, WebP, GIF, BMP) with their SHA-256, and how
an image stands in a worker's token ids.

An image is kept as the bytes the user gave (so hashes, storage and export see exactly them) and
decoded with Pillow only to check it and when a model needs its pixels. In a worker's ids every
KV position of an image holds the image's own negative `key` (derived from its hash): ids stay
plain integers, two different images never share an id, so comparing ids never reuses the KV of
one image for another, and the positions an image takes in a slot are the run of its key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
import stat
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from desktop.bounded import BoundedDict
from desktop.errors import InvalidRequest

MAX_IMAGE_BYTES = 20 * 2**20  # per image, as sent (a phone photo is 3-8 MB)
MAX_IMAGE_PIXELS = 40_000_000  # decompression bombs: a tiny PNG that decodes to gigabytes
MAX_IMAGES = 16  # per request
MAX_ASPECT = 50  # longer side ÷ shorter side: a 1 × 40,000,000 strip costs seconds in every processor
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif", "BMP": "image/bmp"}
NO_IMAGES = "The current model cannot see images: remove the images or choose a vision model (one that takes images) in Settings."
KEY_BITS = 56  # of the SHA-256 in a key: collisions ~2^-56 per pair, and keys fit an int64


@dataclass(frozen=True, slots=True, eq=False)
class ImageData:
    """One image as given: `data` (the encoded file), its SHA-256, MIME type and pixel size.
    Equality and hashing go by the digest (bytes are compared once, by hashing them)."""

    data: bytes = field(repr=False)
    sha256: bytes
    mime: str
    width: int
    height: int

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "The image") -> "ImageData":
        """Check `data` is an image Pillow can decode, within the limits; InvalidRequest if not.
        The size in bytes, then the pixel size and shape from the header are checked before any
        pixel is decoded (a decompression bomb is refused as too large, never decoded)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidRequest(f"{what} must be given as bytes (got {type(data).__name__}).")
        data = bytes(data)
        if not data:
            raise InvalidRequest(f"{what} is empty.")
        if len(data) > MAX_IMAGE_BYTES:
            raise InvalidRequest(f"{what} is {len(data) / 2**20:.1f} MB; the limit is {MAX_IMAGE_BYTES // 2**20} MB per image.")
        from PIL import Image, UnidentifiedImageError

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit below says it
                img = Image.open(io.BytesIO(data))  # the header only: no pixel is decoded yet
            with img:
                fmt, (w, h) = img.format, img.size
                check_dimensions(w, h, what)
                img.load()  # decoded in full: a truncated file is refused now, not when the model reads it
        except InvalidRequest:
            raise
        except Image.DecompressionBombError as exc:  # Pillow's own limit, far above ours: refused at open
            raise InvalidRequest(f"{what} is {_bomb_pixels(exc)}; the limit is {MAX_IMAGE_PIXELS // 1_000_000} megapixels.") from exc
        except UnidentifiedImageError as exc:
            raise InvalidRequest(f"{what} is not an image, or in a format this app cannot read (use PNG, JPEG, WebP, GIF or BMP).") from exc
        except Exception as exc:  # truncated or corrupt files raise OSError, SyntaxError, ValueError …
            raise InvalidRequest(f"{what} is damaged and cannot be read ({exc}).") from exc
        if fmt not in FORMATS:
            raise InvalidRequest(f"{what} is a {fmt} file; use PNG, JPEG, WebP, GIF or BMP.")
        return cls(data, hashlib.sha256(data).digest(), FORMATS[fmt], w, h)

    @classmethod
    def from_data_url(cls, url: str, what: str = "The image") -> "ImageData":
        """From an OpenAI-style `data:image/png;base64,...` URL (remote URLs are refused: nothing
        is ever downloaded)."""
        if not isinstance(url, str) or not url.startswith("data:"):
            raise InvalidRequest(f"{what} must be a data: URL with base64 image bytes; web addresses are not fetched.")
        head, sep, payload = url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise InvalidRequest(f"{what} must be a base64 data: URL (data:image/png;base64,...).")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidRequest(f"{what} is not valid base64.") from exc
        return cls.from_bytes(data, what)

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode()}"

    @property
    def key(self) -> int:
        """The id every KV position of this image holds in a worker's ids (negative: never a token)."""
        return -1 - (int.from_bytes(self.sha256, "big") >> (256 - KEY_BITS))

    def pil(self):
        """The decoded image in RGB (a new Pillow image each call)."""
        from PIL import Image

        with Image.open(io.BytesIO(self.data)) as img:
            return img.convert("RGB")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ImageData) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __reduce__(self):  # pickled across the worker process: bytes and checked fields as they are
        return (ImageData, (self.data, self.sha256, self.mime, self.width, self.height))


def check_dimensions(width: int, height: int, what: str = "The image") -> None:
    """InvalidRequest when an image of this size (from its header) is too large to decode or too
    narrow for a model to use; cheap: nothing is decoded."""
    if width < 1 or height < 1:
        raise InvalidRequest(f"{what} has no pixels ({width}×{height}).")
    if width * height > MAX_IMAGE_PIXELS:
        raise InvalidRequest(f"{what} is {width}×{height} pixels; the limit is {MAX_IMAGE_PIXELS // 1_000_000} megapixels.")
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise InvalidRequest(f"{what} is {width}×{height} pixels, {max(width, height) // min(width, height)} times longer "
                             f"than wide; the limit is {MAX_ASPECT} to 1. Crop it into parts.")


def _bomb_pixels(exc: Exception) -> str:
    """The size Pillow's DecompressionBombError names, in words."""
    found = re.search(r"\((\d+) pixels\)", str(exc))
    return f"{int(found.group(1)) / 1_000_000:,.0f} megapixels" if found else "far too large"


READ_CACHE_BYTES = 128 * 2**20  # checked image files kept by (path, size, mtime): history re-sent each turn
_read_cache: BoundedDict[tuple[str, int, int], ImageData] = BoundedDict(
    max_size=READ_CACHE_BYTES, size=lambda image: len(image.data), lru=True)
_read_lock = threading.Lock()


def read_image(path: str | Path, what: str = "The image") -> ImageData:
    """An image file, checked. Only a regular file is opened (a pipe or a device would block the
    read forever or never end it), and its size is checked before it is read. A file read before
    and unchanged since (same size and modification time) is not read and decoded again."""
    path = Path(path)
    named = f"{what} ({path.name})"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidRequest(f"{named} is not an image file (it is a folder, a device or a pipe).")
        key = (str(path), st.st_size, st.st_mtime_ns)
        with _read_lock:
            hit = _read_cache.get(key)
            if hit is not None:
                return hit
        if st.st_size > MAX_IMAGE_BYTES:
            raise InvalidRequest(f"{named} is {st.st_size / 2**20:.1f} MB; the limit is {MAX_IMAGE_BYTES // 2**20} MB per image.")
        data = _read_regular(path, MAX_IMAGE_BYTES, named)
    except FileNotFoundError:
        raise InvalidRequest(f"{named} is missing: its file was moved or deleted.") from None
    except OSError as exc:
        raise InvalidRequest(f"{named} cannot be read: {exc.strerror or exc}.") from exc
    image = ImageData.from_bytes(data, named)
    with _read_lock:
        _read_cache[key] = image
    return image


def _read_regular(path: Path, limit: int, named: str) -> bytes:
    """At most `limit` bytes of a regular file. Opened without blocking (a pipe put in the file's
    place since it was checked opens at once, and is refused) and checked again once open."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidRequest(f"{named} is not an image file (it is a folder, a device or a pipe).")
        chunks, left = [], limit + 1
        while left > 0 and (chunk := f.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InvalidRequest(f"{named} grew past the {limit // 2**20} MB limit while it was read.")
    return data


def image_part(part: dict[str, Any], what: str) -> ImageData:
    """The image of one content part: {"type": "image", "image": bytes | ImageData | data URL}
    or OpenAI's {"type": "image_url", "image_url": {"url": "data:..."}}. A file path is never
    read here: the app's own stored images are read by its image store (chat/image_store.py),
    off the event loop, into ImageData before the request is made."""
    if part.get("type") == "image" and "path" in part and part.get("image", part.get("data")) is None:
        raise InvalidRequest(f"{what} is given as a file path; send its bytes (a data: URL) instead: files are not read.")
    if part.get("type") == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        return ImageData.from_data_url(url, what)
    value = part.get("image", part.get("data"))
    if isinstance(value, ImageData):
        return value
    if isinstance(value, str):
        return ImageData.from_data_url(value, what)
    if value is None:
        raise InvalidRequest(f"{what} has no image bytes.")
    return ImageData.from_bytes(value, what)


def has_media(ids: Sequence[int]) -> bool:
    return any(t < 0 for t in ids)


@dataclass(frozen=True, slots=True)
class Span:
    """An image's positions in a row of ids: [start, start + length) all hold `key`."""

    key: int
    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length


def image_spans(ids: Sequence[int]) -> list[Span]:
    """The runs of image keys in `ids` (two copies of one image in a row are two runs only if
    something lies between them: an image's placeholders are always wrapped in text markers)."""
    spans: list[Span] = []
    i, n = 0, len(ids)
    while i < n:
        if ids[i] < 0:
            j = i
            while j < n and ids[j] == ids[i]:
                j += 1
            spans.append(Span(ids[i], i, j - i))
            i = j
        else:
            i += 1
    return spans


def safe_cut(ids: Sequence[int], start: int, n: int) -> int:
    """How many of ids[start:start+n] a prefill chunk may take without splitting an image: `n`,
    cut back to the start of an image it would split, or stretched over a whole image that begins
    right at `start` (a vision tower encodes an image in one piece)."""
    end = min(start + n, len(ids))
    if end >= len(ids) or ids[end - 1] >= 0 or ids[end] != ids[end - 1]:
        return end - start
    key, cut = ids[end - 1], end - 1
    while cut > start and ids[cut - 1] == key:
        cut -= 1
    if cut > start:
        return cut - start  # stop before the image; the next chunk takes it whole
    stop = end
    while stop < len(ids) and ids[stop] == key:
        stop += 1
    return stop - start
