"""Shared pytest setup: offline, headless, throwaway user folders, one torch thread, `real_model`.

`real_model` tests load the embedded SmolLM2 default (run only them with `-m real_model`). One
torch thread: the tiny model is dispatch-bound and 2 OpenMP threads under load are ~10× slower."""

import atexit
import os
import pathlib
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Never the user's own settings, conversations, log or KV snapshots, nor a running Omnidesk's instance lock.
_HOME = tempfile.mkdtemp(prefix="omnidesk-tests-")
atexit.register(shutil.rmtree, _HOME, True)
for _name in ("CONFIG", "DATA", "LOG"):
    os.environ.setdefault(f"OMNIDESK_{_name}_DIR", os.path.join(_HOME, _name.lower()))


def _share_models(cache: str) -> None:
    """A throwaway cache folder (KV snapshots: never the user's), whose `models` is the user's own
    cache of converted models, so the embedded default converts once per machine, not per run."""
    from platformdirs import user_cache_dir

    models = pathlib.Path(user_cache_dir("omnidesk")) / "models"
    try:
        models.mkdir(parents=True, exist_ok=True)
        os.makedirs(cache, exist_ok=True)
        os.symlink(models, os.path.join(cache, "models"), target_is_directory=True)
    except OSError:  # no symlinks here (Windows without the right): the default converts in the test folder
        pass


if "OMNIDESK_CACHE_DIR" not in os.environ:
    os.environ["OMNIDESK_CACHE_DIR"] = os.path.join(_HOME, "cache")
    _share_models(os.environ["OMNIDESK_CACHE_DIR"])
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

torch.set_num_threads(1)
# the helpers shared by the test folders (fake hosts, gateway and call fakes) import by name
sys.path.insert(0, str(pathlib.Path(__file__).parent / "support"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_model: loads the real embedded default model (slow; converts once per machine)"
    )
