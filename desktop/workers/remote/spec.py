"""What names one remote worker: the base URL of an OpenAI-compatible server (llama.cpp's server,
vLLM, SGLang), an optional API key and model name, validated and normalised on construction."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_FIELD = 2048
MAX_SLOTS = 256  # conversations one server runs at once; a server saying more is not believed


def check_url(url: str) -> str:
    """The server's base URL as requests are built on it: http(s)://host[:port][/prefix], without a
    trailing "/" or "/v1" (a pasted ".../v1" or ".../v1/chat/completions" is accepted). Raises
    ValueError in plain words."""
    url = url.strip()
    if not url:
        raise ValueError("enter the server's address, e.g. http://127.0.0.1:8080")
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError as exc:
        raise ValueError(f"this is not a valid address ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("the address must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("the address has no host name, e.g. http://127.0.0.1:8080")
    if parts.query or parts.fragment or any(c.isspace() for c in url):
        raise ValueError("the address must be a plain http(s)://host:port, without spaces, ? or #")
    path = parts.path.rstrip("/")
    for tail in ("/chat/completions", "/completions", "/models"):
        path = path.removesuffix(tail)
    path = path.removesuffix("/v1").rstrip("/")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{path}"


def check_text(name: str, value: str) -> str:
    """An optional one-line text field (model name, API key): stripped, no control characters."""
    value = value.strip()
    if len(value) > MAX_FIELD:
        raise ValueError(f"the {name} is longer than {MAX_FIELD} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"the {name} must be one line of text")
    return value


@dataclass(frozen=True, slots=True)
class RemoteSpec:
    """One remote worker. `model` may be empty: the server's first (usually only) model is used.
    `slots`: how many conversations it serves at once (0: asked from the server; else 4)."""

    url: str
    model: str = ""
    api_key: str = ""
    slots: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", check_url(self.url))
        object.__setattr__(self, "model", check_text("model name", self.model))
        object.__setattr__(self, "api_key", check_text("API key", self.api_key))
        if not isinstance(self.slots, int) or not 0 <= self.slots <= MAX_SLOTS:
            raise ValueError(f"slots must be a whole number from 0 (ask the server) to {MAX_SLOTS}")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def __repr__(self) -> str:  # never log the key
        return f"RemoteSpec(url={self.url!r}, model={self.model!r}, api_key={'***' if self.api_key else ''!r})"
