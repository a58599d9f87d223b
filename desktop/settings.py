"""User settings: a pydantic model stored as JSON in the user config folder. Defaults are merged in
on load; a bad value falls back to its default alone, a corrupt file to defaults, both with a warning."""

from __future__ import annotations

import logging
import os
import reprlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from desktop.api.address import check_host, check_key, is_loopback
from desktop.model.loader import ModelSpec
from desktop.model.messages import first_unencodable
from desktop.model.params import SEED_LIMIT, SamplingParams
from desktop.safefile import clean_stale_temps, load_json, set_aside, shorten, write_atomic
from desktop.tools.config import MAX_SERVERS, ServerConfig
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk.files import kv_root
from desktop.workers.remote.spec import RemoteSpec, check_text, check_url

log = logging.getLogger(__name__)

APP = "omnidesk"
MAX_BYTES = 1 << 20  # a settings file is a few KB; anything near this is not one
MAX_TEXT = 4096  # characters in any text setting (paths, names, the window geometry)
VERSION = 3  # settings_version of the files this code writes (see _migrate)
OLD_DEFAULT_SLOTS = 4  # slots_per_worker's default before it became automatic (version 1)
OLD_DEFAULT_DEVICE = "cpu"  # device's default before "auto" (versions 1 and 2)
OLD_DEFAULT_KV_MB = 2048  # kv_budget_mb's default before it became automatic (versions 1 and 2)
FALLBACK_KV_MB = 2048  # the KV budget "automatic" means where no readiness check is at hand
MIN_KV_MB = 16
_BRIEF = reprlib.Repr()  # a bad value as the warning shows it: short, and safe on deep nesting
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlist, _BRIEF.maxdict = 2, 40, 40, 3, 3


class RemoteWorker(BaseModel):
    """An OpenAI-compatible server in the worker pool (desktop/workers/remote): its address, the
    model to ask for ("" = the server's own) and an optional API key (stored in this file)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    url: str
    model: str = ""
    api_key: str = Field("", repr=False)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(v)

    @field_validator("model", "api_key")
    @classmethod
    def _line(cls, v: str, info: Any) -> str:
        return check_text("model name" if info.field_name == "model" else "API key", v)

    def spec(self) -> RemoteSpec:
        return RemoteSpec(self.url, self.model, self.api_key)


class Settings(BaseModel):
    """Everything the user can set. Field bounds are the validation the settings dialog relies on."""

    # strict: a value of the wrong type ("0.5" for a number, 1.5 for a whole number, true for a
    # number) is refused, never converted, so that nothing a worker would choke on gets through.
    model_config = ConfigDict(extra="ignore", validate_assignment=True, strict=True, allow_inf_nan=False)

    # model and workers
    model_source: str = "default"  # "default", a local Hugging Face folder or a .gguf file
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: bf16 on a GPU or a CPU with native bf16
    # a .gguf model file runs on llama.cpp (a local llama.cpp worker: its memory and speed) or is
    # dequantised into the torch runner (images, KV on disk, constrained output); the embedded default: torch
    gguf_runner: Literal["llamacpp", "torch"] = "llamacpp"
    device: str = "auto"  # auto (the readiness check's choice: every GPU, else the CPU) | cpu | cuda | cuda:N
    workers: int = Field(1, ge=1, le=16)  # CPU workers (GPUs: one per device)
    slots_per_worker: int = Field(0, ge=0, le=256)  # conversations kept in memory; 0: as many as the KV budget holds
    cache_mode: Literal["off", "spc", "imc", "imc+spc"] = "imc+spc"
    cache_min_tokens: int = Field(100, ge=1, le=100_000)
    prefill_while_typing: bool = True  # a pause in typing prefills the draft (chat/draft_warm.py)
    kv_budget_mb: int = Field(0, ge=0, le=1_000_000)  # KV cache memory per worker; 0: automatic (readiness check)
    kv_disk_budget_mb: int = Field(2048, ge=0, le=10_000_000)  # KV snapshots on disk (0: none kept)
    context_overflow: Literal["forget", "stop"] = "forget"  # past the window: forget the oldest messages, or stop
    remote_workers: list[RemoteWorker] = Field(default_factory=list, max_length=16)
    # MCP servers whose tools the chat may offer the model (issue 24: desktop/tools/); their env
    # and headers hold the user's secrets as given
    mcp_servers: list[ServerConfig] = Field(default_factory=list, max_length=MAX_SERVERS)
    chat_tools: bool = False  # the chat offers the enabled servers' tools (one switch for all chats)
    # sampling defaults
    temperature: float = Field(0.6, ge=0.0, le=5.0)
    top_p: float = Field(0.9, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, le=1000)
    repetition_penalty: float = Field(1.05, ge=0.5, le=2.0)
    max_tokens: int = Field(512, ge=1, le=32_768)
    seed: int | None = Field(None, ge=0, le=SEED_LIMIT - 1)  # SamplingParams' range (torch's)
    # audio
    audio_output_device: str | None = None
    audio_input_device: str | None = None
    voice_enabled: bool = False  # speak replies aloud
    tts_engine: Literal["piper", "espeak"] = "piper"
    tts_voice: str | None = None  # None: the engine's default voice
    volume: float = Field(1.0, ge=0.0, le=2.0)
    # calls
    call_mode: Literal["duplex", "turns", "push_to_talk"] = "duplex"
    call_idle_timeout_s: float = Field(300.0, ge=10.0, le=86_400.0)  # a silent call ends after this
    # smart: a short pause asks the end-of-turn model; silence: the turn ends after 500 ms of silence
    end_of_turn: Literal["smart", "silence"] = "smart"
    camera_device: str | None = None  # None: the first camera; an index, a /dev path or a video file
    camera_preview_fps: int = Field(15, ge=1, le=60)  # the Call page's preview (and capture) rate
    camera_frames_per_s: float = Field(1.0, ge=0.1, le=5.0)  # frames given to the model
    camera_max_frames: int = Field(16, ge=1, le=256)  # frames a call gives the model in all
    # recording
    recording_enabled: bool = True  # calls are recorded (a "● Recording" sign shows it)
    record_chats: bool = False  # chats too
    retention_days: int = Field(30, ge=1, le=3650)
    max_storage_gb: float = Field(5.0, gt=0.0, le=10_000.0)
    # local API server
    api_server_enabled: bool = False
    api_port: int = Field(8765, ge=1024, le=65535)
    api_key: str | None = None  # required beyond loopback (before api_host: its check reads the key)
    api_host: str = "127.0.0.1"  # 127.0.0.1: this computer only
    # interface state remembered between runs
    system_preset: str = "assistant"
    theme: Literal["system", "light", "dark"] = "system"
    window_geometry: str | None = None  # base64 of QWidget.saveGeometry()
    last_page: Literal["chat", "call", "recordings", "admin", "models"] = "chat"
    last_conversation_id: str | None = None
    settings_version: int = Field(VERSION, ge=1)  # what _migrate reads in an older file
    # model manager (desktop/models, the Models page)
    models_folder: str = ""  # where the page looks for models and downloads go ("": the app's data folder)
    idle_unload_minutes: int = Field(0, ge=0, le=24 * 60)  # unload the model after so many idle minutes (0: never)
    hub_downloads: bool = False  # the Models page may download from the Hugging Face Hub (the network)

    @field_validator("*")
    @classmethod
    def _text(cls, v: Any) -> Any:
        if isinstance(v, str):
            if len(v) > MAX_TEXT:
                raise ValueError(f"text longer than {MAX_TEXT} characters")
            if first_unencodable(v) is not None:
                raise ValueError("text with characters that cannot be stored")
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in ("auto", "cpu", "cuda") and not (v.startswith("cuda:") and v[5:].isdigit()):
            raise ValueError("device must be auto, cpu, cuda or cuda:N")
        return v

    @field_validator("kv_budget_mb")
    @classmethod
    def _kv_budget(cls, v: int) -> int:
        if 0 < v < MIN_KV_MB:
            raise ValueError(f"the cache memory budget is at least {MIN_KV_MB} MB (0: automatic)")
        return v

    @field_validator("model_source")
    @classmethod
    def _source(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("choose the embedded default or a model folder / .gguf file")
        if "\0" in v:
            raise ValueError("a path cannot contain a NUL character")
        return v

    @field_validator("remote_workers")
    @classmethod
    def _distinct_remotes(cls, v: list[RemoteWorker]) -> list[RemoteWorker]:
        seen = [(w.url, w.model) for w in v]
        twice = next((w for i, w in enumerate(seen) if w in seen[:i]), None)
        if twice is not None:
            raise ValueError(f"the server {twice[0]} is listed twice")
        return v

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _usable_servers(cls, v: Any) -> Any:
        """A damaged server entry is left out alone (logged), not the whole list."""
        if not isinstance(v, list):
            return v
        kept = []
        for i, item in enumerate(v):
            try:
                kept.append(item if isinstance(item, ServerConfig) else ServerConfig.model_validate(item))
            except ValidationError as exc:
                log.warning("MCP server %d in the settings is left out: %s", i + 1, exc.errors()[0].get("msg"))
        return kept

    @field_validator("mcp_servers")
    @classmethod
    def _distinct_servers(cls, v: list[ServerConfig]) -> list[ServerConfig]:
        names = [c.name for c in v]
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            raise ValueError(f"the MCP server name {twice!r} is used twice")
        return v

    def remote_specs(self) -> list[RemoteSpec]:
        return [w.spec() for w in self.remote_workers]

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, v: str | None) -> str | None:
        return check_key(v) if v is not None and v.strip() else None

    @field_validator("api_host")
    @classmethod
    def _api_host(cls, v: str, info: ValidationInfo) -> str:
        v = check_host(v)
        if not is_loopback(v) and not info.data.get("api_key"):
            raise ValueError("needs an API key: other computers could reach the server on this address")
        return v

    def model_spec(self, device: str | None = None) -> ModelSpec:
        """`device`: what "auto" resolved to (engine_hosts asks the readiness check); without it
        "auto" reads as the CPU."""
        if device is None:
            device = "cpu" if self.device == "auto" else self.device
        return ModelSpec(self.model_source, self.dtype, device)

    def worker_config(self, kv_budget_mb: int | None = None) -> WorkerConfig:
        """`kv_budget_mb`: what the automatic budget (0) resolved to (engine_hosts asks the
        readiness check); without it, automatic reads as FALLBACK_KV_MB."""
        budget = self.kv_budget_mb or kv_budget_mb or FALLBACK_KV_MB
        return WorkerConfig(
            num_slots=self.slots_per_worker,
            cache_mode=self.cache_mode,
            cache_min_tokens=self.cache_min_tokens,
            kv_budget_bytes=budget << 20,
            kv_dir=str(kv_root()) if self.kv_disk_budget_mb > 0 else "",  # 0 MB: no disk tier
            kv_disk_budget_bytes=self.kv_disk_budget_mb << 20,
        )

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            repetition_penalty=self.repetition_penalty,
            seed=self.seed,
        )

    def needs_reload(self, other: Settings) -> bool:
        """Whether going from self to other needs the model/workers rebuilt (with progress). Remote
        workers do not: they join and leave the running pool (Composition.apply_settings)."""
        keys = ("model_source", "gguf_runner", "dtype", "device", "workers", "slots_per_worker", "cache_mode", "cache_min_tokens",
                "kv_budget_mb", "kv_disk_budget_mb")
        return any(getattr(self, k) != getattr(other, k) for k in keys)


def config_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(os.environ.get("OMNIDESK_CONFIG_DIR") or user_config_dir(APP))


def settings_path() -> Path:
    return config_dir() / "settings.json"


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """(settings, warning). Missing keys take defaults and unknown ones are dropped (logged). An
    invalid value falls back to its default alone, the others are kept; the warning names it and
    a copy of the file is kept. A file that cannot be read at all (not JSON, nested too deeply,
    larger than 1 MB) gives defaults and is renamed to settings.bad-<time>[-n].json."""
    path = path or settings_path()
    clean_stale_temps(path.parent)
    try:
        data = load_json(path, MAX_BYTES)
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
    except FileNotFoundError:
        return Settings(), None
    except (OSError, ValueError) as exc:
        aside = _set_aside(path, copy=False)
        kept = f"The old file was kept as {aside}." if aside else "The old file could not be moved aside."
        return Settings(), f"Your settings file could not be read ({exc}); defaults are in use. {kept}"
    data = _migrate(data)
    unknown = [str(k) for k in data if k not in Settings.model_fields]
    if unknown:
        log.warning("Ignored unknown settings in %s: %s", path, ", ".join(shorten(k) for k in unknown[:20]))
    settings, rejected = _validate_each(data)
    if not rejected:
        return settings, None
    aside = _set_aside(path, copy=True)
    named = [f"{name} = {shorten(_BRIEF.repr(value))} ({why})" for name, (value, why) in rejected.items()]
    what = "; ".join(named[:8]) + (f"; and {len(named) - 8} more (see the log)" if len(named) > 8 else "")
    kept = f" The original file was kept as {aside}." if aside else ""
    log.warning("Invalid settings in %s reset to their defaults: %s", path, "; ".join(named))
    return settings, (f"Some settings were not valid and now use their defaults: {what}. "
                      f"Your other settings are kept.{kept}")


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    """An older file's values, as this version means them. Version 1 (no settings_version) wrote
    slots_per_worker = 4, its default, whether or not the user chose it: 4 becomes automatic
    (0: as many conversations as the KV budget holds); another number was a choice and is kept.
    Versions 1 and 2 wrote device = "cpu" and kv_budget_mb = 2048, their defaults: they become
    automatic the same way."""
    version = data.get("settings_version", 1)
    if isinstance(version, int) and version < 2 and data.get("slots_per_worker") == OLD_DEFAULT_SLOTS:
        log.info("Conversations kept in memory: now automatic (from the KV budget), was the old default of 4")
        data = {**data, "slots_per_worker": 0}
    if isinstance(version, int) and version < 3 and data.get("device") == OLD_DEFAULT_DEVICE:
        log.info("Device: now automatic (the readiness check's choice), was the old default of cpu")
        data = {**data, "device": "auto"}
    if isinstance(version, int) and version < 3 and data.get("kv_budget_mb") == OLD_DEFAULT_KV_MB:
        log.info("Cache memory budget: now automatic (from free memory), was the old default of 2048 MB")
        data = {**data, "kv_budget_mb": 0}
    return {**data, "settings_version": VERSION}


def _validate_each(data: dict[str, Any]) -> tuple[Settings, dict[str, tuple[Any, str]]]:
    """Settings from `data` with every invalid field dropped (→ its default), and what was dropped:
    {field: (bad value, why)}."""
    clean = {k: v for k, v in data.items() if k in Settings.model_fields}
    rejected: dict[str, tuple[Any, str]] = {}
    while True:
        try:
            return Settings.model_validate(clean), rejected
        except ValidationError as exc:
            bad = {}
            for err in exc.errors():
                loc = err.get("loc") or ("",)
                if loc[0] in clean:
                    why = str(err.get("msg", "invalid")).removeprefix("Value error, ")
                    bad.setdefault(loc[0], why[:1].lower() + why[1:])
            if not bad:  # not tied to one field: give up on all of them
                bad = {k: "invalid together with the other settings" for k in clean}
                if not bad:
                    return Settings(), rejected
            for name, why in bad.items():
                rejected[str(name)] = (clean.pop(name), why)


def _set_aside(path: Path, *, copy: bool) -> Path | None:
    try:
        return set_aside(path, tag="bad", copy=copy)
    except OSError as exc:
        log.error("Could not keep the settings file %s aside: %s", path, exc)
        return None


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically (a unique temporary file, then a rename): a crash or a second writer never
    leaves a half file."""
    write_atomic(path or settings_path(), settings.model_dump_json(indent=2))
