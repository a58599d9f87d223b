"""Bounded reads of a remote server's answers: a body read up to a byte limit, and an event stream
cut into lines of at most a given length, so that no server can make this side buffer without end."""

from __future__ import annotations

from typing import AsyncIterator

import httpx

LINE_LIMIT = 1 << 20  # one line of an event stream (a llama.cpp line is well under 4 KiB)
ERROR_BODY_LIMIT = 64 << 10  # what is read of an error answer (its first words are what is shown)
INFO_LIMIT = 4 << 20  # /v1/models, /props: far above any real server's answer
IDENTITY = {"Accept-Encoding": "identity"}  # read byte for byte: no compressed body to inflate


class TooLong(Exception):
    """The server sent more than a limit allows; str() says what, in words."""


def _plain(resp: httpx.Response) -> None:
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise TooLong(f"it compressed its answer ({encoding}) though asked not to")


async def read_capped(resp: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    """The body of a streamed response, at most `limit` bytes: beyond that raise TooLong, or with
    `cut` return the first `limit` bytes (an error body: its beginning says what went wrong)."""
    _plain(resp)
    got, size = [], 0
    async for chunk in resp.aiter_raw():
        if size + len(chunk) > limit:
            if cut:
                got.append(chunk[:limit - size])
                break
            raise TooLong(f"its answer is longer than {limit >> 20 or 1} MiB" if limit >= 1 << 20
                          else f"its answer is longer than {limit >> 10} KiB")
        got.append(chunk)
        size += len(chunk)
    return b"".join(got)


class Lines:
    """The lines of an event stream as text (\\n, \\r\\n; the end of the body ends the last one).
    A line longer than `limit` bytes raises TooLong; `peak` is the most bytes ever held at once."""

    def __init__(self, resp: httpx.Response, limit: int | None = None) -> None:
        self.resp, self.limit, self.peak = resp, LINE_LIMIT if limit is None else limit, 0

    async def each(self) -> AsyncIterator[str]:
        _plain(self.resp)
        held = bytearray()
        async for chunk in self.resp.aiter_raw():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if len(held) + end - start > self.limit:
                    raise TooLong(f"it sent a line longer than {self._said()} without a line break")
                held += chunk[start:end]
                self.peak = max(self.peak, len(held))
                yield held.decode("utf-8", "replace").rstrip("\r")
                held.clear()
                start = end + 1
            rest = len(chunk) - start
            if len(held) + rest > self.limit:
                raise TooLong(f"it sent more than {self._said()} without a line break")
            held += chunk[start:]
            self.peak = max(self.peak, len(held))
        if held:
            yield held.decode("utf-8", "replace").rstrip("\r")

    def _said(self) -> str:
        return f"{self.limit >> 20} MiB" if self.limit >= 1 << 20 else f"{self.limit:,} bytes"
