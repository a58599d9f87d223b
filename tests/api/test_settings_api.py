"""The API's settings: loopback by default; another address only with a key (a settings file
without one falls back to 127.0.0.1, the rest kept); keys and hosts checked in plain words."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from desktop.settings import Settings, load_settings


def test_defaults_are_off_and_loopback_without_a_key() -> None:
    s = Settings()
    assert not s.api_server_enabled and s.api_host == "127.0.0.1" and s.api_key is None


def test_another_address_needs_a_key() -> None:
    with pytest.raises(ValidationError, match="needs an API key"):
        Settings(api_host="0.0.0.0")
    assert Settings(api_host="0.0.0.0", api_key="abcdefgh1234").api_host == "0.0.0.0"
    assert Settings(api_host=" localhost ").api_host == "localhost"
    assert Settings(api_host="::1").api_host == "::1"
    assert Settings(api_key="   ").api_key is None  # an empty field: no key
    for host, words in (("my pc", "IP address"), ("300.1.1.1", "IP address")):
        with pytest.raises(ValidationError, match=words):
            Settings(api_host=host)
    for key, words in (("short", "8 to 256"), ("has spaces in it", "only letters"), ("x" * 257, "8 to 256")):
        with pytest.raises(ValidationError, match=words):
            Settings(api_key=key)


def test_a_file_asking_for_every_network_without_a_key_falls_back_to_loopback(tmp_path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"api_server_enabled": True, "api_host": "0.0.0.0", "api_port": 9000}))
    settings, warning = load_settings(path)
    assert settings.api_host == "127.0.0.1" and settings.api_server_enabled and settings.api_port == 9000
    assert warning is not None and "api_host" in warning
    path.write_text(json.dumps({"api_host": "0.0.0.0", "api_key": "no"}))
    settings, warning = load_settings(path)
    assert settings.api_host == "127.0.0.1" and settings.api_key is None and "api_key" in warning
