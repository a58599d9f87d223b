"""kill -9 while snapshots are being written: the next start indexes every complete snapshot and
never a torn one (a write goes to a temporary file renamed into place), and cleans the leftovers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from desktop.safefile import clean_stale_temps
from desktop.workers.kv_disk import format as fmt
from desktop.workers.kv_disk.files import SnapshotDir
from desktop.workers.kv_disk.store import DiskStore

WRITER = textwrap.dedent("""
    import sys, torch
    from desktop.model.messages import Message, prefix_hashes
    from desktop.workers.kv_disk import format as fmt
    from desktop.workers.kv_disk.files import SnapshotDir
    from desktop.workers.kv_disk.state import SnapState
    folder = SnapshotDir(sys.argv[1])
    k = torch.randn(4, 1 << 20)  # 16 MB a tensor, 32 MB a snapshot: a write takes a while
    for i in range(1000):
        msgs = (Message("user", f"conversation {i}"),)
        state = SnapState((1, 2, 3), msgs, tuple(prefix_hashes(msgs)), (1, 2, 3), (3,))
        fmt.write(folder.path_for("", state.key), {"k.0": k, "v.0": k + i}, "fp", state, {"layers": 1})
""")


def test_a_write_killed_midway_leaves_only_complete_snapshots(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # at least one snapshot done and the next one half written
            names = os.listdir(tmp_path) if tmp_path.exists() else []
            if any(n.endswith(".kvsnap") for n in names) and any(n.endswith(".tmp") for n in names):
                break
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    names = os.listdir(tmp_path)
    assert any(n.endswith(".tmp") for n in names), names  # the torn write is there, under a temporary name
    done = [n for n in names if n.endswith(".kvsnap")]
    store = DiskStore(SnapshotDir(tmp_path), "fp", 1 << 40, lambda saved: saved, lambda tensors, meta, n: tensors)
    assert store.scan() == len(done) >= 1
    for entry in SnapshotDir(tmp_path).entries():
        snap, _ = store.find(fmt.read_header(entry.path).state.hashes)
        tensors = store.restore(snap, 3)  # read whole, its checksum verified
        assert tensors is not None and tensors["k.0"].shape == tensors["v.0"].shape == (4, 1 << 20)
    assert clean_stale_temps(tmp_path, now=time.time() + 60) >= 1  # the dead writer's leftover goes
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))
