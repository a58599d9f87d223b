"""Pasted MCP configs: the common shapes read, and each mistake named in a sentence."""

from __future__ import annotations

import json

import pytest

from desktop.tools.config import ConfigError, ServerConfig, merged, parse_pasted, server


def test_claude_desktop_shape_reads_stdio_and_http_servers():
    text = json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"TOKEN": "s3cret"}},
        "web": {"type": "streamable-http", "url": "https://example.org/mcp", "headers": {"Authorization": "Bearer x"}},
    }})
    files, web = parse_pasted(text)
    assert (files.name, files.transport, files.command, files.args, files.env) == (
        "files", "stdio", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], {"TOKEN": "s3cret"})
    assert (web.name, web.transport, web.url, web.headers) == ("web", "http", "https://example.org/mcp",
                                                               {"Authorization": "Bearer x"})
    assert "s3cret" not in repr(files) and "Bearer" not in repr(web)  # secrets kept, never logged


@pytest.mark.parametrize("shape", [
    lambda s: {"servers": s}, lambda s: s, lambda s: {"name": "a", **s["a"]},
])
def test_other_shapes(shape):
    (cfg,) = parse_pasted(json.dumps(shape({"a": {"command": "run-me"}})))
    assert (cfg.name, cfg.command) == ("a", "run-me")


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ("[]", "JSON object"),
    ('{"mcpServers": []}', "maps each server"),
    ('{"mcpServers": {"a": {}}}', "either a command"),
    ('{"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}', "not both"),
    ('{"mcpServers": {"a": {"url": "ftp://h"}}}', "http://"),
    ('{"mcpServers": {"a": {"command": "x", "args": "-v"}}}', "\"args\" must be a list"),
    ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "\"env\" must map"),
    ('{"mcpServers": {"a": {"command": "x", "cwdir": "/"}}}', "\"cwdir\" is not a setting"),
    ('{"mcpServers": {"a/b": {"command": "x"}}}', "name 'a/b'"),
    ('{"mcpServers": {"a": "x"}}', "must be a JSON object"),
])
def test_mistakes_are_named(text, words):
    with pytest.raises(ConfigError) as err:
        parse_pasted(text)
    assert words in str(err.value)
    assert str(err.value)[0].isupper() and str(err.value).endswith(".")


def test_merged_replaces_by_name():
    a, b = server({"command": "one"}, "a"), server({"command": "two"}, "b")
    a2 = server({"url": "http://127.0.0.1:1/mcp"}, "a")
    assert merged([a, b], [a2]) == [b, a2]


def test_round_trips_through_json():
    cfg = server({"command": "x", "args": ["1"], "env": {"K": "V"}}, "a")
    assert ServerConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_settings_keep_servers_and_refuse_a_name_twice(tmp_path):
    from desktop.settings import Settings

    cfg = server({"command": "x", "env": {"API_KEY": "s3cret"}}, "a")
    s = Settings(mcp_servers=[cfg], chat_tools=True)
    back = Settings.model_validate_json(s.model_dump_json())
    assert back.mcp_servers == [cfg] and back.mcp_servers[0].env == {"API_KEY": "s3cret"} and back.chat_tools
    with pytest.raises(ValueError, match="used twice"):
        Settings(mcp_servers=[cfg, cfg])
    kept = Settings.model_validate({"mcp_servers": [{"name": "b"}, cfg.model_dump()]})  # b: neither command nor url
    assert kept.mcp_servers == [cfg]  # the damaged entry alone is left out


def test_claude_desktop_disabled_and_auto_approve():
    (cfg,) = parse_pasted('{"mcpServers": {"a": {"command": "x", "disabled": true, "autoApprove": ["rm"]}}}')
    assert cfg.enabled is False  # and nothing is approved ahead: every call is asked in the chat
