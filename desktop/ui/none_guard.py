"""Keep None alive under PySide6 6.12 on Python 3.11: its void methods return None without a new
reference, so each call (setText, setPosition, …) steals one of None's references, and the app
died with "Fatal Python error: none_dealloc" after about 3,000 streamed tokens."""

from __future__ import annotations

import ctypes
import sys

MARGIN = 1 << 40  # at ~20 stolen references per streamed token: centuries of chatting


def pin_none() -> bool:
    """Give None so many references that no session can use them up. Only needed before Python
    3.12 (from 3.12 None is immortal); safe to call more than once. Returns whether it acted."""
    if sys.version_info >= (3, 12) or getattr(pin_none, "done", False):
        return False
    ctypes.c_ssize_t.from_address(id(None)).value += MARGIN  # ob_refcnt: the first field of an object
    pin_none.done = True  # type: ignore[attr-defined]
    return True
