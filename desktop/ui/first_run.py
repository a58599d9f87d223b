"""The first-run page: one screen, shown on the first start and when the hardware changed, with
what the readiness check found on this computer, what it chose and why. "Change…" opens the
Model settings; "Continue" closes it. Either way it is not shown again until the machine changes."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.model.hardware import GIB, Machine
from desktop.ui.settings_form import hint
from desktop.workers.readiness import Choices

TITLE = "Ready to run on this computer"
FEATURES = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))


def found(m: Machine) -> list[tuple[str, str]]:
    """(what, in words) for each fact the page shows."""
    gpus = "; ".join(f"{g.name} ({g.memory_bytes / GIB:.0f} GB, compute {g.capability[0]}.{g.capability[1]})"
                     for g in m.gpus) or ("none" + (f" ({m.gpu_note})" if m.gpu_note else ""))
    features = ", ".join(name for flag, name in FEATURES if flag in m.cpu_flags) or "no wide vector units"
    return [("GPUs", gpus),
            ("CPU", f"{_count(m.physical_cores, 'physical core')} ({_count(m.logical_cores, 'thread')}); {features}"),
            ("Memory", f"{m.ram_total / GIB:.1f} GB, {m.ram_available / GIB:.1f} GB free"),
            ("Disk", f"{m.disk_free / GIB:.0f} GB free for the cache")]


def chosen(c: Choices) -> list[tuple[str, str, str]]:
    """(what, the choice in words, why) for each choice the page shows."""
    device = "GPU" if c.device.value == "cuda" else "CPU"
    workers = f"{c.workers.value} worker{'s' if c.workers.value != 1 else ''}"
    return [("Runs on", f"{device}, {workers}", c.device.reason + " " + c.workers.reason),
            ("Data type", str(c.dtype.value), c.dtype.reason),
            ("CPU threads", str(c.threads.value), c.threads.reason),
            ("Cache memory", f"{c.kv_budget_mb.value:,} MB", c.kv_budget_mb.reason),
            ("Conversations kept", "automatic", c.slots.reason),
            ("Embedded model", "fits" if c.embedded_fits.value else "does not fit", c.embedded_fits.reason),
            ("Larger models", f"up to ≈ {c.largest_model_b.value:g}B parameters" if c.largest_model_b.value else "none",
             c.largest_model_b.reason)]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class FirstRunPage(QDialog):
    """Not modal to the app's work: the model loads behind it. `change_requested`: open Settings."""

    change_requested = Signal()

    def __init__(self, machine: Machine, choices: Choices, parent: QWidget | None = None, *, changed: bool = False) -> None:
        super().__init__(parent)
        self.setWindowTitle(TITLE)
        self.setObjectName("firstRun")
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        heading = QLabel(f"<b>{TITLE}</b>")
        layout.addWidget(heading)
        intro = ("The hardware changed since the last start, so Omnidesk looked again." if changed else
                 "Omnidesk looked at this computer and chose how to run the model on it.")
        layout.addWidget(hint(intro + " You can change any of it in Settings → Model."))
        layout.addWidget(self._section("Found", [(k, v, "") for k, v in found(machine)]))
        layout.addWidget(self._section("Chosen", chosen(choices)))
        buttons = QDialogButtonBox()
        self.change = QPushButton("&Change…")
        self.cont = QPushButton("C&ontinue")
        self.cont.setDefault(True)
        buttons.addButton(self.change, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.cont, QDialogButtonBox.ButtonRole.AcceptRole)
        self.change.clicked.connect(self._change)
        self.cont.clicked.connect(self.accept)
        layout.addWidget(buttons)
        self.setMinimumWidth(640)

    def _section(self, title: str, rows: list[tuple[str, str, str]]) -> QWidget:
        box = QWidget()
        grid = QGridLayout(box)
        grid.setContentsMargins(0, 4, 0, 0)
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(4)
        grid.addWidget(QLabel(f"<b>{title}</b>"), 0, 0, 1, 2)
        row = 1
        for name, value, why in rows:
            label = QLabel(name + ":")
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
            shown = QLabel(value)
            shown.setTextFormat(Qt.TextFormat.PlainText)  # GPU names and notes are not markup
            shown.setWordWrap(True)
            shown.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            grid.addWidget(label, row, 0)
            grid.addWidget(shown, row, 1)
            row += 1
            if why:
                reason = hint(why)
                reason.setTextFormat(Qt.TextFormat.PlainText)
                grid.addWidget(reason, row, 1)
                row += 1
        grid.setColumnStretch(1, 1)
        return box

    def _change(self) -> None:
        self.change_requested.emit()
        self.accept()
