"""MCP servers as the user gives them: a command to start (stdio: command, args, env) or the URL of
a streamable-HTTP server (with headers), named, with its tools on or off. A pasted JSON config in
the common `mcpServers` shape (Claude Desktop, Cursor, VS Code's `servers`) becomes a list of them;
whatever is wrong is named in a sentence (ConfigError). Secrets in env or headers are the user's
and are kept as given."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

NAME = re.compile(r"^[A-Za-z0-9_. -]{1,64}$")
MAX_SERVERS = 32


class ConfigError(ValueError):
    """A config that cannot be used; its text says what is wrong, for the user."""


class ServerConfig(BaseModel):
    """One MCP server: `command` (+ args, env) for stdio, or `url` (+ headers) for streamable HTTP."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)  # a newer file's fields: kept out, not fatal

    name: str = Field(min_length=1, max_length=64)
    command: str = ""
    args: list[str] = Field(default_factory=list, max_length=256)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    enabled: bool = True  # its tools are offered to the model

    @model_validator(mode="after")
    def _check(self) -> ServerConfig:
        if not NAME.match(self.name):
            raise ValueError(f"the name {self.name!r} must be 1 to 64 letters, digits, spaces, _ . or -")
        if bool(self.command.strip()) == bool(self.url.strip()):
            raise ValueError(f"server {self.name!r} needs either a command (stdio) or a url (HTTP), not both")
        if self.url and not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(f"server {self.name!r}: the url must start with http:// or https:// (got {self.url!r})")
        for where, mapping in (("env", self.env), ("headers", self.headers)):
            for key, value in mapping.items():
                if not key or any(c in key + value for c in "\r\n\0"):
                    raise ValueError(f"server {self.name!r}: {where} entry {key!r} holds a line break or is empty")
        return self

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """What starts it, for a list: the command line or the URL."""
        return self.url if self.url else " ".join([self.command, *self.args])


def server(data: Any, name: str | None = None) -> ServerConfig:
    """One server from a dict (its name given or inside); ConfigError naming what is wrong."""
    if not isinstance(data, dict):
        raise ConfigError(f"Server {name!r} must be a JSON object with a \"command\" or a \"url\".")
    data = dict(data)
    if name is not None:
        data["name"] = name
    data.pop("type", None)  # "stdio" | "http" | "streamable-http": what command/url already say
    data.pop("autoApprove", None)  # Cline's: here every call is approved in the chat
    if isinstance(data.get("disabled"), bool):  # Claude Desktop's and Cline's off switch
        data["enabled"] = not data.pop("disabled")
    unknown = sorted(set(data) - set(ServerConfig.model_fields))
    if unknown:
        raise ConfigError(f"Server {data.get('name')!r}: \"{unknown[0]}\" is not a setting of an MCP server "
                          "(use command, args, env, url, headers).")
    if "serverUrl" in data and "url" not in data:  # Windsurf's spelling
        data["url"] = data.pop("serverUrl")
    for key in ("args",):
        if key in data and not (isinstance(data[key], list) and all(isinstance(a, str) for a in data[key])):
            raise ConfigError(f"Server {data.get('name')!r}: \"{key}\" must be a list of strings.")
    for key in ("env", "headers"):
        value = data.get(key)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            raise ConfigError(f"Server {data.get('name')!r}: \"{key}\" must map names to strings.")
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_sentence(err, data.get("name"))) from None


def parse_pasted(text: str) -> list[ServerConfig]:
    """The servers of a pasted config: `{"mcpServers": {name: {…}}}`, `{"servers": {…}}`, a bare
    `{name: {…}}` map, or a single server object with a "name". ConfigError when nothing usable."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"This is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}.") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError("Paste a JSON object such as {\"mcpServers\": {\"name\": {\"command\": …}}}.")
    if "name" in data and ("command" in data or "url" in data):
        return [server(data)]
    block = data.get("mcpServers", data.get("servers", data))
    if not isinstance(block, dict) or not block:
        raise ConfigError("The \"mcpServers\" entry must be an object that maps each server's name to its settings.")
    if len(block) > MAX_SERVERS:
        raise ConfigError(f"At most {MAX_SERVERS} servers can be added at once.")
    return [server(v, k) for k, v in block.items()]


def merged(old: list[ServerConfig], new: list[ServerConfig]) -> list[ServerConfig]:
    """`old` with `new` added; a server of the same name is replaced."""
    names = {s.name for s in new}
    out = [s for s in old if s.name not in names] + list(new)
    if len(out) > MAX_SERVERS:
        raise ConfigError(f"At most {MAX_SERVERS} servers can be kept.")
    return out


def _sentence(err: ValidationError, name: Any) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    msg = first.get("msg", "is not valid").removeprefix("Value error, ")
    if where and where != "name" and first.get("type") != "value_error":
        msg = f"\"{where}\": {msg}"
    return f"Server {name!r}: {msg}." if name else f"{msg[0].upper()}{msg[1:]}."
