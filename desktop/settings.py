"""User settings: a pydantic model stored as JSON in the user config folder. Defaults are merged in
on load; a corrupt file falls back to defaults with a warning and is kept aside, never lost."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig

APP = "omnidesk"


class Settings(BaseModel):
    """Everything the user can set. Field bounds are the validation the settings dialog relies on."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    # model and workers
    model_source: str = "default"  # "default", a local Hugging Face folder or a .gguf file
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"  # cpu | cuda | cuda:N
    workers: int = Field(1, ge=1, le=16)  # CPU workers (GPUs: one per device)
    slots_per_worker: int = Field(4, ge=1, le=64)
    cache_mode: Literal["off", "spc", "imc", "imc+spc"] = "imc+spc"
    cache_min_tokens: int = Field(100, ge=1, le=100_000)
    kv_budget_mb: int = Field(2048, ge=16, le=1_000_000)
    # sampling defaults
    temperature: float = Field(0.6, ge=0.0, le=5.0)
    top_p: float = Field(0.9, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, le=1000)
    repetition_penalty: float = Field(1.05, ge=0.5, le=2.0)
    max_tokens: int = Field(512, ge=1, le=32_768)
    seed: int | None = None
    # audio
    audio_output_device: str | None = None
    audio_input_device: str | None = None
    voice_enabled: bool = False  # speak replies aloud
    tts_engine: Literal["piper", "espeak"] = "piper"
    tts_voice: str | None = None  # None: the engine's default voice
    volume: float = Field(1.0, ge=0.0, le=2.0)
    # recording
    recording_enabled: bool = False
    retention_days: int = Field(30, ge=1, le=3650)
    max_storage_gb: float = Field(5.0, gt=0.0, le=10_000.0)
    # local API server
    api_server_enabled: bool = False
    api_port: int = Field(8765, ge=1024, le=65535)
    # interface state remembered between runs
    system_preset: str = "assistant"
    theme: Literal["system", "light", "dark"] = "system"
    window_geometry: str | None = None  # base64 of QWidget.saveGeometry()
    last_page: Literal["chat", "call", "recordings", "admin"] = "chat"
    last_conversation_id: str | None = None

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in ("cpu", "cuda") and not (v.startswith("cuda:") and v[5:].isdigit()):
            raise ValueError("device must be cpu, cuda or cuda:N")
        return v

    @field_validator("model_source")
    @classmethod
    def _source(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("choose the embedded default or a model folder / .gguf file")
        return v

    def model_spec(self) -> ModelSpec:
        return ModelSpec(self.model_source, self.dtype, self.device)

    def worker_config(self) -> WorkerConfig:
        return WorkerConfig(
            num_slots=self.slots_per_worker,
            cache_mode=self.cache_mode,
            cache_min_tokens=self.cache_min_tokens,
            kv_budget_bytes=self.kv_budget_mb << 20,
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
        """Whether going from self to other needs the model/workers rebuilt (with progress)."""
        keys = ("model_source", "dtype", "device", "workers", "slots_per_worker", "cache_mode", "cache_min_tokens", "kv_budget_mb")
        return any(getattr(self, k) != getattr(other, k) for k in keys)


def config_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(os.environ.get("OMNIDESK_CONFIG_DIR") or user_config_dir(APP))


def settings_path() -> Path:
    return config_dir() / "settings.json"


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """(settings, warning). Unknown keys are dropped, missing ones take defaults; a file that is not
    JSON or has invalid values gives defaults and a warning, and is renamed to settings.bad-<time>.json."""
    path = path or settings_path()
    if not path.exists():
        return Settings(), None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return Settings.model_validate(data), None
    except (OSError, ValueError, ValidationError) as exc:
        aside = path.with_name(f"settings.bad-{time.strftime('%Y%m%d-%H%M%S')}.json")
        try:
            path.replace(aside)
        except OSError:
            aside = path
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Settings(), f"Your settings file could not be read ({first}); defaults are in use. The old file was kept as {aside}."


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically: a crash mid-write never leaves a half file."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(settings.model_dump_json(indent=2), encoding="utf-8")
    os.replace(tmp, path)
