"""Images attached to conversations, kept in the conversations' own storage: one file per image,
named by its SHA-256 (so a branch and its parent share the file, and one image attached twice is
stored once), written atomically. A message refers to its images by these paths; the original
file the user picked may be moved or deleted afterwards. No Qt."""

from __future__ import annotations

from pathlib import Path

from desktop.model.images import ImageData, read_image
from desktop.safefile import write_atomic

SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif", "image/bmp": ".bmp"}


class ImageStore:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, image: ImageData) -> Path:
        return self.root / (image.sha256.hex() + SUFFIXES.get(image.mime, ".img"))

    def add(self, image: ImageData) -> Path:
        """Keep `image` (checked bytes) and return its stored path; an image already kept is not written again."""
        path = self.path_for(image)
        if not path.is_file() or path.stat().st_size != len(image.data):
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomic(path, image.data)
        return path

    def add_file(self, source: Path | str) -> Path:
        """Copy an image file in (checked: InvalidRequest says why one is refused)."""
        return self.add(read_image(source))

    def load(self, path: Path | str) -> ImageData:
        return read_image(path)
