"""Which addresses the API may listen on, and which of them only this computer can reach (no
imports beyond the standard library: the settings validate with it)."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = ("localhost",)
KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=")


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from this computer (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str) -> str:
    """An IP address (v4 or v6) or localhost, tidied; ValueError in plain words otherwise."""
    host = host.strip().strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return host.lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise ValueError("must be an IP address such as 127.0.0.1 (this computer only) or 0.0.0.0 (every network)") from None


def check_key(key: str) -> str:
    """An API key: 8 to 256 letters, digits or -_.~+/= (it travels in an HTTP header)."""
    key = key.strip()
    if not 8 <= len(key) <= 256:
        raise ValueError("must be 8 to 256 characters long")
    if not set(key) <= KEY_CHARS:
        raise ValueError("may contain only letters, digits and - _ . ~ + / =")
    return key
