"""What the user asks the Hub for: a repo id or a URL read into (repo, revision, file), and the
repo's files grouped into the choices a download offers (one quantisation of a GGUF repo, or the
whole safetensors model). Pure: the file list comes from the download child (download_child.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
QUANT = re.compile(r"(?:^|[._-])((?:I?Q\d(?:_[A-Z0-9]+)*)|F16|BF16|F32)(?:[._-]|$)", re.IGNORECASE)
MODEL_FILES = re.compile(r"(\.json|\.safetensors|\.model|\.txt|\.tiktoken|\.jinja|\.py)$")


@dataclass(frozen=True)
class Request:
    repo_id: str
    revision: str = "main"
    filename: str = ""  # a URL that named one file


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str = ""  # LFS files: the content's sha256
    blob_id: str = ""  # the git blob id (sha1 of "blob <size>\0" + content)


@dataclass(frozen=True)
class Choice:
    label: str  # "Q4_K_M · 4.4 GB", "Full model (safetensors)"
    files: tuple[HubFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def parse(text: str) -> Request:
    """"org/name", or a Hub URL (…/org/name, …/tree/rev, …/blob/rev/file, …/resolve/rev/file).
    ValueError with a sentence otherwise."""
    text = text.strip()
    if "://" in text:
        parts = [unquote(p) for p in urlsplit(text).path.strip("/").split("/") if p]
        if parts[:1] == ["models"]:
            parts = parts[1:]
        if len(parts) < 2:
            raise ValueError(f"{text} is not a model's address on the Hub (https://huggingface.co/ORG/NAME).")
        repo = "/".join(parts[:2])
        if len(parts) >= 4 and parts[2] in ("tree", "blob", "resolve"):
            req = Request(repo, parts[3], "/".join(parts[4:]))
        else:
            req = Request(repo)
    else:
        req = Request(text)
    if not REPO_ID.match(req.repo_id):
        raise ValueError(f"{text!r} is not a Hub repo id: write it as ORG/NAME, e.g. Qwen/Qwen2.5-1.5B-Instruct-GGUF.")
    return req


def quant_of(name: str) -> str:
    found = QUANT.findall(name.rsplit("/", 1)[-1].removesuffix(".gguf"))
    return found[-1].upper() if found else ""


def choices(files: list[HubFile], wanted: str = "") -> list[Choice]:
    """A GGUF repo: one choice per model file (its vision projector goes with each); else the
    whole model (config, tokenizer and safetensors; .bin only where there are no safetensors).
    `wanted`: the one file a URL named."""
    from desktop.models.facts import human_bytes

    if wanted:
        picked = [f for f in files if f.path == wanted]
        return [Choice(f"{wanted} · {human_bytes(picked[0].size)}", tuple(picked))] if picked else []
    ggufs = [f for f in files if f.path.lower().endswith(".gguf")]
    projector = tuple(f for f in ggufs if f.path.rsplit("/", 1)[-1].lower().startswith("mmproj"))[:1]
    models = [f for f in ggufs if f not in projector]
    if models:
        out = [Choice(f"{quant_of(f.path) or f.path} · {human_bytes(f.size)}  ({f.path})", (f, *projector))
               for f in models]
        return sorted(out, key=lambda c: c.size)
    weights = [f for f in files if f.path.endswith(".safetensors")]
    keep = [f for f in files if MODEL_FILES.search(f.path) and "/" not in f.path]
    if not weights:
        keep += [f for f in files if f.path.endswith(".bin") and "/" not in f.path]
    if not keep:
        return []
    total = sum(f.size for f in keep)
    return [Choice(f"Full model ({'safetensors' if weights else 'files'}) · {human_bytes(total)}", tuple(keep))]


def folder_name(repo_id: str) -> str:
    """The folder a repo downloads into, inside the models folder."""
    return repo_id.replace("/", "--")
