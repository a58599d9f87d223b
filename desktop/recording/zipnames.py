"""Names for the members of an exported zip that are safe to unzip anywhere: no absolute path, no
drive (`C:x`), no `..`, no backslash, no Windows device or illegal name; unique ignoring case."""

from __future__ import annotations

import re

_ILLEGAL = re.compile(r'[\x00-\x1f<>:"|?*\\/]')  # not in a Windows file name (nor a separator)
_DEVICE = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$", re.IGNORECASE)
MAX_PART = 120


def safe_part(name: str) -> str:
    """One path component as it can be unzipped on Windows, macOS and Linux (never "", "." or "..")."""
    part = _ILLEGAL.sub("_", name).rstrip(" .")  # Windows drops trailing dots and spaces
    if not part.strip("._ "):
        part = "_" + part.replace(".", "_")  # "..", ".", "" and the like
    if _DEVICE.match(part):
        part = "_" + part
    return part[:MAX_PART]


class MemberNames:
    """`name(parts)`: the zip member name for a file at `parts` (its path's components), made safe
    and unique (ignoring case, as Windows and macOS do) among the names given so far."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def name(self, parts: list[str] | tuple[str, ...]) -> str:
        safe = [safe_part(p) for p in parts] or ["_"]
        stem, dot, ext = safe[-1].rpartition(".")
        if not dot or not stem:
            stem, ext = safe[-1], ""
        candidate, n = "/".join(safe), 1
        while candidate.casefold() in self._taken:
            n += 1
            safe[-1] = f"{stem}~{n}.{ext}" if ext else f"{stem}~{n}"
            candidate = "/".join(safe)
        self._taken.add(candidate.casefold())
        return candidate
