"""The `model` field: which names this server answers to. /v1/models lists the loaded model by
the name its worker reported (the embedded model's, the folder's or the GGUF file's name); a
request may also name it the way the settings do ("default", the path, the file name), in any
case. A request for another model gets OpenAI's 404 `model_not_found`, never an answer from the
loaded one; a request that names none gets the loaded one."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Sequence

from desktop.api.errors import ApiError

def aliases(source: str) -> tuple[str, ...]:
    """The other names of the model loaded from the settings' `source` ("default", "tiny", a
    folder or a .gguf file): the source as written, its last path part, and a file's stem."""
    source = source.strip()
    if not source:
        return ()
    path = PurePath(source.rstrip("/\\") or source)
    names = [source, path.name]
    if path.suffix.lower() == ".gguf":
        names.append(path.stem)
    return tuple(dict.fromkeys(n for n in names if n))


def answers_to(requested: str, model: str, other_names: Sequence[str]) -> bool:
    wanted = requested.strip().casefold()
    return any(wanted == name.casefold() for name in (model, *other_names))


def check_model(requested: Any, model: str, other_names: Sequence[str] = ()) -> None:
    """404 model_not_found unless `requested` (a request's `model` field) names the loaded model;
    a missing or empty field is the loaded model."""
    if requested is None or (isinstance(requested, str) and not requested.strip()):
        return
    if not isinstance(requested, str):
        raise ApiError(400, f"model must be a string (got {type(requested).__name__}).", param="model")
    if not answers_to(requested, model, other_names):
        raise not_found(requested, model)


def not_found(requested: str, model: str | None) -> ApiError:
    loaded = f"the one loaded is {model!r}" if model else "none is loaded now"
    return ApiError(404, f"The model {requested[:200]!r} does not exist here; {loaded} (GET /v1/models lists it). "
                    "Omnidesk serves the model chosen in its settings (or with `omnidesk serve --model`).",
                    code="model_not_found", param="model")
