"""Recording tests: the engine tests' helpers (call fakes, `run`) are importable here too."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "engine"))
