"""Safe files for the user's data, shared by settings, conversations, presets and exports: atomic
writes under unique temporary names, reads capped in size, bad files set aside under unique names."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
STALE_TMP_S = 15 * 60  # a temporary file this old is a leftover, whoever wrote it
DEAD_TMP_S = 10.0  # ... and one whose writer's process is gone, after 10 s (a write takes ms)
_TMP = re.compile(r"^\..+\.(\d+)-[A-Za-z0-9_]+\.tmp$")  # ours: .<name>.<pid>-<random>.tmp
_OLD_TMP = re.compile(r"^(\..+\.[A-Za-z0-9_]{8}\.tmp|.+\.json\.tmp)$")  # names earlier versions used


class FileTooLarge(ValueError):
    """A file is larger than the size its reader accepts; it was not read."""


def human_size(n: int) -> str:
    """1536 → "1.5 KB", 64 << 20 → "64 MB"."""
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" or size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # not reached


def write_atomic(path: Path | str, data: str | bytes | Callable[[str], object]) -> None:
    """Write `data` (str: as UTF-8) to `path`: readers see the old file or the new one, never half
    of one, and two writers never share a temporary file (each gets a unique name beside `path`,
    flushed to disk before os.replace moves it in). An existing file's permissions are kept.
    `data` may also be a function that writes the temporary file by its name (a large file
    streamed by a library, never held in memory whole)."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "r+b") as f:
            try:
                os.fchmod(f.fileno(), stat.S_IMODE(os.stat(path).st_mode))
            except (OSError, AttributeError):  # a new file (mkstemp's 0600) or no fchmod (Windows)
                pass
            if callable(raw):
                raw(tmp)
            else:
                f.write(raw)
                f.flush()
            os.fsync(f.fileno())
        _replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def _replace(src: str, dst: Path) -> None:
    for attempt in range(5):  # Windows refuses to replace a file another process has open, briefly
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if os.name != "nt" or attempt == 4:
                raise
            time.sleep(0.02 * (attempt + 1))


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); best effort."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_capped(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of `path`, or FileTooLarge (naming the limit) without reading it when it is larger
    than `max_bytes`; a file that grows while being read is refused too, and so is anything but a
    regular file (a FIFO would block the read forever)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError("it is not a regular file")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise FileTooLarge(f"it is {human_size(size)}, larger than the {human_size(max_bytes)} limit")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(f"it grew past the {human_size(max_bytes)} limit while being read")
    return data


def load_json(path: Path | str, max_bytes: int) -> Any:
    """Parse a JSON file of at most `max_bytes`. Every way it can be bad (too large, not UTF-8, not
    JSON, nested too deeply to parse) is a ValueError with a short reason; OSError when unreadable."""
    data = read_capped(path, max_bytes)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("it is nested too deeply to read") from None
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    except ValueError as exc:
        raise ValueError(f"it is not valid JSON ({shorten(str(exc), 80)})") from None


def shorten(text: str, limit: int = 40) -> str:
    """`text` cut to `limit` characters with an ellipsis, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def set_aside(path: Path | str, folder: Path | str | None = None, *, tag: str = "bad", copy: bool = False) -> Path:
    """Move (or copy) `path` to `<stem>.<tag>-<time>[-n]<suffix>` in `folder` (default: beside it)
    and return the new path. The name is reserved with O_EXCL first, so two set-asides, in one
    second or from two processes, never overwrite each other. Nothing is ever deleted."""
    path = Path(path)
    dest_dir = Path(folder) if folder is not None else path.parent
    dest_dir.mkdir(parents=True, exist_ok=True)
    stem, suffix = (path.stem, path.suffix) if path.suffix else (path.name, "")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        dest = dest_dir / f"{stem}.{tag}-{stamp}{'' if n == 1 else f'-{n}'}{suffix}"
        try:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            if copy:
                with open(path, "rb") as src, os.fdopen(fd, "wb") as out:
                    fd = -1
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
            else:
                os.close(fd)
                fd = -1
                os.replace(path, dest)  # replaces only our own empty reservation
        except BaseException:
            if fd >= 0:
                os.close(fd)
            dest.unlink(missing_ok=True)
            raise
        return dest
    raise FileExistsError(f"No free name to set {path.name} aside in {dest_dir}.")


def clean_stale_temps(folder: Path | str, *, now: float | None = None) -> int:
    """Remove the temporary files that writes in `folder` left behind when their process was
    killed: ours whose process is gone (after 10 s) and any of ours older than 15 minutes.
    Returns how many were removed."""
    now = time.time() if now is None else now
    removed, freed = 0, 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        name = entry.name
        if not name.endswith(TMP_SUFFIX):
            continue
        mine = _TMP.match(name)
        if not mine and not _OLD_TMP.match(name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                continue
            age = now - info.st_mtime
            dead = mine is not None and age > DEAD_TMP_S and not _alive(int(mine.group(1)))
            if age > STALE_TMP_S or dead:
                os.unlink(entry.path)
                removed, freed = removed + 1, freed + info.st_size
        except OSError:
            continue
    if removed:
        log.info("Removed %d leftover temporary file(s) (%s) in %s", removed, human_size(freed), folder)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name != "posix":  # os.kill(pid, 0) is not a probe on Windows: rely on the age alone
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True
