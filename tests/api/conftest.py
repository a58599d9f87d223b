"""API tests: make the helper module next to them (`api_helpers`) importable."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
