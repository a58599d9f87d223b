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
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from desktop.errors import InvalidRequest

MAX_IMAGE_BYTES = 20 * 2**20  # per image, as sent (a phone photo is 3-8 MB)
MAX_IMAGE_PIXELS = 40_000_000  # decompression bombs: a tiny PNG that decodes to gigabytes
MAX_IMAGES = 16  # per request
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
        """Check `data` is an image Pillow can decode, within the limits; InvalidRequest if not."""
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
                img = Image.open(io.BytesIO(data))
            with img:
                fmt, (w, h) = img.format, img.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise InvalidRequest(f"{what} is {w}×{h} pixels; the limit is {MAX_IMAGE_PIXELS // 1_000_000} megapixels.")
                img.load()  # decoded in full: a truncated file is refused now, not when the model reads it
        except InvalidRequest:
            raise
        except (UnidentifiedImageError, Image.DecompressionBombError) as exc:
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


READ_CACHE_BYTES = 128 * 2**20  # checked image files kept by (path, size, mtime): history re-sent each turn
_read_cache: "OrderedDict[tuple[str, int, int], ImageData]" = OrderedDict()
_read_lock = threading.Lock()


def read_image(path: str | Path, what: str = "The image") -> ImageData:
    """An image file, checked (its size before reading it). A file read before and unchanged since
    (same size and modification time) is not read and decoded again."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        with _read_lock:
            hit = _read_cache.get(key)
            if hit is not None:
                _read_cache.move_to_end(key)
                return hit
        size = st.st_size
        if size > MAX_IMAGE_BYTES:
            raise InvalidRequest(f"{what} ({path.name}) is {size / 2**20:.1f} MB; the limit is {MAX_IMAGE_BYTES // 2**20} MB per image.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidRequest(f"{what} ({path.name}) is missing: its file was moved or deleted.") from None
    except OSError as exc:
        raise InvalidRequest(f"{what} ({path.name}) cannot be read: {exc.strerror or exc}.") from exc
    image = ImageData.from_bytes(data, f"{what} ({path.name})")
    with _read_lock:
        _read_cache[key] = image
        while sum(len(i.data) for i in _read_cache.values()) > READ_CACHE_BYTES:
            _read_cache.popitem(last=False)
    return image


def image_part(part: dict[str, Any], what: str) -> ImageData:
    """The image of one content part: {"type": "image", "image": bytes | ImageData | data URL},
    {"type": "image", "path": a file (the app's own stored images)} or OpenAI's
    {"type": "image_url", "image_url": {"url": "data:..."}}."""
    if part.get("type") == "image" and isinstance(part.get("path"), (str, Path)):
        return read_image(part["path"], what)
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


def is_media(token: int) -> bool:
    return token < 0


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
