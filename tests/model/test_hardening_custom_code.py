"""Issue 8, item 7: code in a model folder never runs. transformers asked on stdin "Do you wish to
run the custom code? [y/N]" for a tokenizer with an `auto_map`, and ran it on "y"."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.model.tiny import tiny_model, tiny_tokenizer

pytestmark = pytest.mark.hardening

ROOT = Path(__file__).resolve().parents[2]
LOAD = "from desktop.model.loader import ModelSpec, load_model; import sys; load_model(ModelSpec(sys.argv[1])); print('LOADED')"


def evil_folder(root: Path, where: str) -> tuple[Path, Path]:
    """A tiny model whose tokenizer (or model) names a .py file in the folder through `auto_map`;
    running that file writes MARKER."""
    folder, marker = root / f"evil-{where}", root / f"MARKER-{where}"
    tiny_model().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    (folder / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from transformers import LlamaForCausalLM, PreTrainedTokenizerFast\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n"
        "class EvilModel(LlamaForCausalLM):\n    pass\n"
    )
    name = "tokenizer_config.json" if where == "tokenizer" else "config.json"
    cfg = json.loads((folder / name).read_text())
    if where == "tokenizer":
        cfg["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
        cfg["tokenizer_class"] = "EvilTokenizer"
    else:
        cfg["auto_map"] = {"AutoModelForCausalLM": "evil.EvilModel"}
    (folder / name).write_text(json.dumps(cfg))
    return folder, marker


def load_in_child(folder: Path, answer: bytes | None) -> tuple[subprocess.CompletedProcess, float]:
    """Load `folder` in a fresh interpreter whose stdin is a pipe: never answered (None) or
    answered with `answer`. Bounded: a prompt waiting on stdin would hit the timeout."""
    start = time.monotonic()
    with subprocess.Popen([sys.executable, "-c", LOAD, str(folder)], cwd=ROOT, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(folder.parent)}) as proc:
        if answer is not None:
            proc.stdin.write(answer)
            proc.stdin.flush()
        try:
            out, err = proc.communicate(timeout=120) if answer is not None else _wait_open_stdin(proc)
        finally:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode()), time.monotonic() - start


def _wait_open_stdin(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """Wait for the child with its stdin kept open and silent (as a terminal where nobody types)."""
    proc.wait(timeout=120)
    return proc.stdout.read(), proc.stderr.read()


@pytest.mark.parametrize("answer", [None, b"y\n"], ids=["nobody-answers", "answers-yes"])
def test_custom_tokenizer_code_is_refused_without_a_prompt(tmp_path, answer):
    folder, marker = evil_folder(tmp_path, "tokenizer")
    result, took = load_in_child(folder, answer)
    text = result.stdout + result.stderr
    assert "LOADED" not in text and result.returncode != 0
    assert "Do you wish to run the custom code" not in text
    assert "needs custom code" in text and "never runs code from a model folder" in text, text[-2000:]
    assert not marker.exists(), "code from the model folder ran"
    assert took < 60, took  # transformers' own prompt waits 15 s before it gives up


def test_custom_model_code_is_never_imported(tmp_path):
    """An `auto_map` for the model of a known architecture: the built-in class is used, the
    folder's .py never runs."""
    from desktop.model.loader import ModelSpec, load_model

    folder, marker = evil_folder(tmp_path, "model")
    loaded = load_model(ModelSpec(str(folder)))
    assert type(loaded.model).__module__.startswith("transformers.models.llama")
    assert not marker.exists()


def test_every_from_pretrained_call_refuses_remote_code():
    """Every transformers loading call in the app passes trust_remote_code=False (directly or
    through loader.NO_REMOTE), so no future call can bring the prompt back."""
    calls = []
    for path in (ROOT / "desktop").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("from_pretrained", "from_config"):
                safe = any(
                    (k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant) and k.value.value is False)
                    or (k.arg is None and isinstance(k.value, ast.Name) and k.value.id == "NO_REMOTE")
                    for k in node.keywords
                )
                calls.append((f"{path.relative_to(ROOT)}:{node.lineno}", safe))
    assert len(calls) >= 7, calls
    assert all(safe for _, safe in calls), [c for c, safe in calls if not safe]
