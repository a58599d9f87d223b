"""Issue 22: the disk tier's settings reach the workers (folder and budget; 0 MB = no disk tier),
a changed budget rebuilds them, and tests never write into the user's own cache."""

from __future__ import annotations

import os
from pathlib import Path

from desktop.settings import Settings
from desktop.workers.kv_disk.files import kv_root


def test_the_worker_config_gets_the_snapshot_folder_and_budget():
    config = Settings(kv_disk_budget_mb=300).worker_config()
    assert config.kv_dir == str(kv_root()) and config.kv_disk_budget_bytes == 300 << 20
    assert Settings().worker_config().kv_disk_budget_bytes == 2 << 30  # 2 GB by default


def test_no_budget_is_no_disk_tier():
    config = Settings(kv_disk_budget_mb=0).worker_config()
    assert config.kv_dir == "" and config.kv_disk_budget_bytes == 0


def test_a_changed_disk_budget_rebuilds_the_workers():
    base = Settings()
    assert base.needs_reload(base.model_copy(update={"kv_disk_budget_mb": 512}))
    assert base.needs_reload(base.model_copy(update={"kv_disk_budget_mb": 0}))
    assert not base.needs_reload(base.model_copy(update={"kv_disk_budget_mb": base.kv_disk_budget_mb}))


def test_tests_keep_their_snapshots_out_of_the_users_cache():
    from platformdirs import user_cache_dir

    root = kv_root()
    assert os.environ.get("OMNIDESK_CACHE_DIR") and root.parent == Path(os.environ["OMNIDESK_CACHE_DIR"])
    assert Path(user_cache_dir("omnidesk")) not in root.parents
