"""Engine tests: make the helper modules next to them (`fake_host`, `gw_helpers`) importable."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
