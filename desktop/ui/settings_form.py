"""Building blocks of the settings pages: spin boxes ranged by the pydantic field bounds, grey hint
lines, and a form Page that maps Settings field names to widgets and plain-word labels."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractButton, QComboBox, QDoubleSpinBox, QFormLayout, QLabel, QLineEdit, QSizePolicy, QSpinBox,
    QStyle, QVBoxLayout, QWidget,
)

from desktop.settings import Settings


def bounds(name: str) -> tuple[float, float, bool]:
    """(low, high, low_is_exclusive) of a Settings field, from its pydantic constraints."""
    lo, hi, exclusive = float("-inf"), float("inf"), False
    for m in Settings.model_fields[name].metadata:
        if getattr(m, "ge", None) is not None:
            lo = m.ge
        if getattr(m, "gt", None) is not None:
            lo, exclusive = m.gt, True
        if getattr(m, "le", None) is not None:
            hi = m.le
    return lo, hi, exclusive


def field_width(widget: QWidget) -> int:
    """One width for the short fields (spin boxes, seed, device) so that they line up."""
    return widget.fontMetrics().horizontalAdvance("0" * 16)


def int_spin(name: str, suffix: str = "", step: int = 1) -> QSpinBox:
    lo, hi, exclusive = bounds(name)
    spin = QSpinBox()
    spin.setMinimumWidth(field_width(spin))
    spin.setRange(int(lo) + exclusive, int(hi))
    spin.setSingleStep(step)
    spin.setSuffix(suffix)
    return spin


def float_spin(name: str, decimals: int = 2, step: float = 0.05, suffix: str = "") -> QDoubleSpinBox:
    lo, hi, exclusive = bounds(name)
    spin = QDoubleSpinBox()
    spin.setMinimumWidth(field_width(spin))
    spin.setDecimals(decimals)
    spin.setRange(lo + (10**-decimals if exclusive else 0.0), hi)
    spin.setSingleStep(step)
    spin.setSuffix(suffix)
    return spin


def hint(text: str) -> QLabel:
    """A small grey explanation line under a field."""
    label = QLabel(text)
    label.setWordWrap(True)
    font = label.font()
    font.setPointSizeF(font.pointSizeF() * 0.9)
    label.setFont(font)
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, palette.color(QPalette.ColorRole.PlaceholderText))
    label.setPalette(palette)
    return label


class Page(QWidget):
    """A form page. `fields` maps Settings field names to their widget, `labels` to plain words."""

    changed = Signal()

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title = title
        self.form = QFormLayout(self)
        self.form.setVerticalSpacing(10)
        self.fields: dict[str, QWidget] = {}
        self.labels: dict[str, str] = {}

    def add(self, text: str, key: str, widget: QWidget, note: str = "", *,
            buddy: QWidget | None = None) -> QLabel | None:
        """A row: label (with & for the mnemonic, buddy of the widget or of `buddy`), the widget, and
        a grey note under it, which is returned. No text: the widget (a check box) spans the row and
        the note is indented."""
        field = QVBoxLayout()  # a layout, so that short fields keep their width while notes wrap wide
        field.setSpacing(2)
        grows = bool(widget.sizePolicy().horizontalPolicy().value & QSizePolicy.PolicyFlag.ExpandFlag.value)
        field.addWidget(widget, 0, Qt.AlignmentFlag(0) if grows else Qt.AlignmentFlag.AlignLeft)
        line = None
        if note:
            line = hint(note)
            if not text:
                style = widget.style()
                indent = style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth)
                line.setIndent(indent + style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing))
            field.addWidget(line)
        if text:
            label = QLabel(text)
            label.setBuddy(buddy or widget)
            self.form.addRow(label, field)
        else:
            self.form.addRow(field)
        self.fields[key] = widget
        self.labels[key] = text.replace("&", "").rstrip(":") or widget.property("text").replace("&", "")
        self._watch(widget)
        return line

    def _watch(self, widget: QWidget) -> None:
        if isinstance(widget, (QSpinBox, QDoubleSpinBox)):
            widget.valueChanged.connect(self.changed)
        elif isinstance(widget, QComboBox):
            widget.currentIndexChanged.connect(self.changed)
            widget.editTextChanged.connect(self.changed)
        elif isinstance(widget, QLineEdit):
            widget.textChanged.connect(self.changed)
        elif isinstance(widget, QAbstractButton):
            widget.toggled.connect(self.changed)

    def values(self) -> dict[str, object]:
        raise NotImplementedError
