"""The pages of the settings dialog: one form per section, each showing its fields of a Settings
and giving back a dict of raw values that the dialog validates as a whole (Audio: settings_audio,
the local API server: settings_api)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from PySide6.QtCore import QRegularExpression, Qt
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QButtonGroup, QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton,
    QRadioButton, QSizePolicy, QVBoxLayout,
)

from desktop.settings import Settings
from desktop.ui.settings_api import ApiPage
from desktop.ui.settings_audio import AudioPage
from desktop.ui.settings_form import Page, field_width, float_spin, hint, int_spin
from desktop.ui.settings_kv_disk import disk_rows

__all__ = ["ApiPage", "AudioPage", "CachePage", "ModelPage", "RecordingPage", "SamplingPage"]

BUILTIN_SOURCES = ("default", "tiny")  # model sources that are names, not paths
AUTO_SLOTS = "Automatic (from the KV budget)"  # slots_per_worker 0
AUTO_BUDGET = "Automatic (from free memory)"  # kv_budget_mb 0
AUTO_DEVICE = "Automatic"  # device "auto": the readiness check's choice
GGUF_RUNNERS = (("llama.cpp (least memory, fastest on the CPU)", "llamacpp"),
                ("torch (images, conversations kept on disk)", "torch"))
CACHE_MODES = {
    "imc+spc": ("Conversation and system prompt (imc+spc, recommended)",
                "Each turn processes only the new messages; new chats reuse the system prompt."),
    "imc": ("Conversation only (imc)", "Each turn processes only the new messages."),
    "spc": ("System prompt only (spc)", "The system prompt is computed once; every turn re-reads the chat."),
    "off": ("Off", "Every turn recomputes the whole conversation (slowest; for comparisons)."),
}


OVERFLOW_CHOICES = (("Forget the oldest messages", "forget"), ("Stop and tell me", "stop"))


class ModelPage(Page):
    """Which model (embedded default or a local folder / .gguf file), device, dtype and workers."""

    def __init__(self, s: Settings) -> None:
        super().__init__("Model")
        self.file_dialog: QFileDialog | None = None
        self.builtin = QRadioButton("&Embedded default (SmolLM2-135M-Instruct)")
        self.local = QRadioButton("&Local model folder or GGUF file:")
        self.path = QLineEdit("" if s.model_source == "default" else s.model_source)
        self.path.setPlaceholderText("A model folder or a .gguf file")
        self.path.setClearButtonEnabled(True)
        self.path.textEdited.connect(lambda: self.local.setChecked(True))
        (self.builtin if s.model_source == "default" else self.local).setChecked(True)
        folder, gguf = QPushButton("&Folder…"), QPushButton("&GGUF file…")
        folder.clicked.connect(lambda: self.pick(folder=True))
        gguf.clicked.connect(lambda: self.pick(folder=False))
        row = QHBoxLayout()
        style = self.local.style()
        row.setContentsMargins(style.pixelMetric(style.PixelMetric.PM_ExclusiveIndicatorWidth)
                               + style.pixelMetric(style.PixelMetric.PM_RadioButtonLabelSpacing), 0, 0, 0)
        row.addWidget(self.path, 1)
        row.addWidget(folder)
        row.addWidget(gguf)
        source = QVBoxLayout()
        source.setSpacing(4)
        source.addWidget(self.builtin)
        source.addWidget(self.local)
        source.addLayout(row)
        note = hint("A Hugging Face model folder (config.json, tokenizer, *.safetensors) "
                    "or one .gguf file.")
        note.setIndent(row.contentsMargins().left())
        source.addWidget(note)
        self.form.addRow("Model:", source)
        self.fields["model_source"], self.labels["model_source"] = self.path, "Model"
        for w in (self.builtin, self.path):
            self._watch(w)
        self.gguf_runner = QComboBox()
        for text, key in GGUF_RUNNERS:
            self.gguf_runner.addItem(text, key)
        self.gguf_runner.setCurrentIndex(max(0, self.gguf_runner.findData(s.gguf_runner)))
        self.add("GGUF files &run on:", "gguf_runner", self.gguf_runner,
                 "llama.cpp: about the file's size in memory, at llama.cpp's speed, on the CPU; text only, "
                 "conversations not kept on disk. torch: images, conversations on disk, constrained output, "
                 "GPUs; several times the file's size. The embedded default always uses torch.")
        self.device = QComboBox()
        self.device.setEditable(True)
        self.device.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.device.addItems([AUTO_DEVICE, "cpu", "cuda"] + ([s.device] if s.device not in ("auto", "cpu", "cuda") else []))
        self.device.setCurrentText(AUTO_DEVICE if s.device == "auto" else s.device)
        self.device.lineEdit().setPlaceholderText("Automatic, cpu, cuda or cuda:N")
        self.device.setMinimumWidth(field_width(self.device))
        self.add("&Device:", "device", self.device, "Automatic: every GPU found (one worker each), else the CPU. "
                 "cpu, cuda (every GPU) or cuda:N for GPU number N.")
        self.dtype = QComboBox()
        self.dtype.addItems(list(get_args(Settings.model_fields["dtype"].annotation)))
        self.dtype.setCurrentText(s.dtype)
        self.dtype.setMinimumWidth(field_width(self.dtype))
        self.add("Data &type:", "dtype", self.dtype, "auto: bfloat16 on a GPU or a CPU that computes bf16 natively, else float32. "
                 "float32: exact, twice the memory. bfloat16 or float16: half the memory, faster.")
        self.workers = int_spin("workers")
        self.workers.setValue(s.workers)
        self.add("&Workers:", "workers", self.workers, "Model copies on the CPU (a GPU device gets one each).")
        self.slots = int_spin("slots_per_worker")
        self.slots.setSpecialValueText(AUTO_SLOTS)  # 0
        self.slots.setMinimumWidth(self.slots.fontMetrics().horizontalAdvance(AUTO_SLOTS + "0000"))
        self.slots.setValue(s.slots_per_worker)
        self.add("Conversations kept in &memory:", "slots_per_worker", self.slots,
                 "Per worker. Automatic keeps as many as the cache memory budget holds; when room is "
                 "needed, short, idle and API conversations go before the ones open in this window.")

    def source(self) -> str:
        return "default" if self.builtin.isChecked() else self.path.text().strip()

    def values(self) -> dict[str, object]:
        device = self.device.currentText().strip()
        return {"model_source": self.source(), "device": "auto" if device.lower() == AUTO_DEVICE.lower() else device,
                "dtype": self.dtype.currentText(), "workers": self.workers.value(),
                "slots_per_worker": self.slots.value(), "gguf_runner": self.gguf_runner.currentData()}

    def problem(self) -> str | None:
        """Why the chosen model path cannot be a model (checked on OK, so a working model is not
        unloaded for a path that cannot load; the loader checks deeper)."""
        source = self.source()
        if not source or source in BUILTIN_SOURCES:
            return None
        path = Path(source).expanduser()
        if not path.exists():
            return "this path does not exist. Choose a model folder or a .gguf file."
        if path.is_file() and path.suffix.lower() != ".gguf" and path.name != "config.json":
            return f"“{path.name}” is not a .gguf file. Choose a .gguf file or a model folder."
        if path.is_dir() and not (path / "config.json").is_file() and not any(path.glob("*.gguf")):
            return ("this folder is not a model: it has no config.json (nor a .gguf file). "
                    "Choose a Hugging Face model folder or a .gguf file.")
        return None

    def pick(self, folder: bool) -> None:
        """Open a file chooser without blocking (open(), never exec(): safe under qasync)."""
        text = self.path.text().strip()
        current = Path(text).expanduser() if text else Path.home()
        start = str(current if current.is_dir() else current.parent if current.parent.is_dir() else Path.home())
        title = "Choose a model folder" if folder else "Choose a GGUF model file"
        dlg = QFileDialog(self, title, start)
        if folder:
            dlg.setFileMode(QFileDialog.FileMode.Directory)
            dlg.setOption(QFileDialog.Option.ShowDirsOnly)
        else:
            dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
            dlg.setNameFilters(["GGUF models (*.gguf)", "All files (*)"])
        dlg.fileSelected.connect(self._chosen)
        dlg.finished.connect(self._picker_closed)
        self.file_dialog = dlg
        dlg.open()

    def _picker_closed(self) -> None:
        if self.file_dialog is not None:
            self.file_dialog.deleteLater()
            self.file_dialog = None

    def _chosen(self, path: str) -> None:
        if path:
            self.path.setText(path)
            self.local.setChecked(True)


class CachePage(Page):
    """Conversation cache mode, minimum shared prefix, KV memory budget, prefill while typing, and
    the conversation memory on disk (settings_kv_disk: `snapshots`, the folder, or None)."""

    def __init__(self, s: Settings, snapshots: Any = None) -> None:
        super().__init__("Cache")
        self.mode = QButtonGroup(self)
        box = QVBoxLayout()
        box.setSpacing(2)
        for i, (key, (text, note)) in enumerate(CACHE_MODES.items()):
            radio = QRadioButton(text)
            radio.setProperty("mode", key)
            radio.setChecked(key == s.cache_mode)
            self.mode.addButton(radio, i)
            self._watch(radio)
            line = hint(note)
            line.setContentsMargins(radio.sizeHint().height(), 0, 0, 6)
            box.addWidget(radio)
            box.addWidget(line)
        title = QLabel("Conversation cache:")
        self.form.addRow(title, box)
        self.fields["cache_mode"], self.labels["cache_mode"] = self.mode.buttons()[0], "Conversation cache"
        self.min_tokens = int_spin("cache_min_tokens", " tokens", 50)
        self.min_tokens.setValue(s.cache_min_tokens)
        self.add("&Minimum shared prefix:", "cache_min_tokens", self.min_tokens,
                 "An edited or branched chat reuses a cached one when they share at least this many tokens.")
        self.budget = int_spin("kv_budget_mb", " MB", 256)
        self.budget.setSpecialValueText(AUTO_BUDGET)  # 0
        self.budget.setMinimumWidth(self.budget.fontMetrics().horizontalAdvance(AUTO_BUDGET + "0000"))
        self.budget.setValue(s.kv_budget_mb)
        self.add("Memory &budget:", "kv_budget_mb", self.budget,
                 "Cache memory per worker (Automatic: from the free memory the readiness check found); beyond "
                 "it the conversations least worth keeping (short, idle, from the API) are dropped first.")
        self.typing = QCheckBox("Pre&fill while I type")
        self.typing.setChecked(s.prefill_while_typing)
        self.add("", "prefill_while_typing", self.typing,
                 "A pause in typing reads your draft into the cache, so that the reply starts sooner after Send.")
        self.disk_budget, self.disk_usage = disk_rows(self, s, snapshots)

    def values(self) -> dict[str, object]:
        return {"cache_mode": self.mode.checkedButton().property("mode"),
                "cache_min_tokens": self.min_tokens.value(), "kv_budget_mb": self.budget.value(),
                "prefill_while_typing": self.typing.isChecked(), "kv_disk_budget_mb": self.disk_budget.mb()}


class SamplingPage(Page):
    """Default sampling parameters; an empty seed means random."""

    def __init__(self, s: Settings) -> None:
        super().__init__("Sampling")
        self.form.addRow(hint("How the model picks its words: the defaults for every new reply."))
        self.temperature = float_spin("temperature")
        self.temperature.setValue(s.temperature)
        self.add("&Temperature:", "temperature", self.temperature, "0 always picks the most likely word; "
                 "higher values give more varied answers.")
        self.top_p = float_spin("top_p")
        self.top_p.setValue(s.top_p)
        self.add("Top &p:", "top_p", self.top_p, "Pick only among the words that make up this share of the chances.")
        self.top_k = int_spin("top_k")
        self.top_k.setSpecialValueText("off")
        self.top_k.setValue(s.top_k)
        self.add("Top &k:", "top_k", self.top_k, "Pick only among this many most likely words (0 = off).")
        self.penalty = float_spin("repetition_penalty")
        self.penalty.setValue(s.repetition_penalty)
        self.add("&Repetition penalty:", "repetition_penalty", self.penalty, "Above 1 discourages repeating words.")
        self.max_tokens = int_spin("max_tokens", " tokens", 64)
        self.max_tokens.setValue(s.max_tokens)
        self.add("&Longest reply:", "max_tokens", self.max_tokens)
        self.overflow = QComboBox()
        for label, value in OVERFLOW_CHOICES:
            self.overflow.addItem(label, value)
        self.overflow.setCurrentIndex(max(self.overflow.findData(s.context_overflow), 0))
        self.add("Past the &window:", "context_overflow", self.overflow,
                 "When a conversation is longer than the model's window. Forgetting keeps the system prompt and "
                 "the latest messages; nothing is deleted from the conversation.")
        self.seed = QLineEdit("" if s.seed is None else str(s.seed))
        self.seed.setPlaceholderText("random")
        self.seed.setValidator(QRegularExpressionValidator(QRegularExpression(r"\d{0,18}"), self.seed))
        self.seed.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.seed.setFixedWidth(max(self.max_tokens.sizeHint().width(), self.max_tokens.minimumWidth()))
        self.add("&Seed:", "seed", self.seed, "Empty: a new random seed each time. A number: repeatable replies.")

    def values(self) -> dict[str, object]:
        seed = self.seed.text().strip()
        return {"temperature": self.temperature.value(), "top_p": self.top_p.value(),
                "top_k": self.top_k.value(), "repetition_penalty": self.penalty.value(),
                "max_tokens": self.max_tokens.value(), "seed": int(seed) if seed else None,
                "context_overflow": self.overflow.currentData()}


class RecordingPage(Page):
    """Session recording on/off and its clean-up limits (age and disk space)."""

    def __init__(self, s: Settings) -> None:
        super().__init__("Recording")
        self.enabled = QCheckBox("&Record call sessions (your audio, the AI's audio, frames and text)")
        self.enabled.setChecked(s.recording_enabled)
        self.add("", "recording_enabled", self.enabled, "Recordings stay on this computer; "
                 "you can replay them in the session viewer.")
        self.chats = QCheckBox("Record &chats too (your messages, images and the replies)")
        self.chats.setChecked(s.record_chats)
        self.add("", "record_chats", self.chats)
        self.days = int_spin("retention_days", " days", 7)
        self.days.setValue(s.retention_days)
        self.add("&Keep recordings for:", "retention_days", self.days, "Older recordings are deleted.")
        self.gb = float_spin("max_storage_gb", 1, 1.0, " GB")
        self.gb.setValue(s.max_storage_gb)
        self.add("&Use at most:", "max_storage_gb", self.gb, "Beyond this, the oldest recordings are deleted first.")
        self.enabled.toggled.connect(lambda _on: self._sync())
        self.chats.toggled.connect(lambda _on: self._sync())
        self._sync()

    def _sync(self) -> None:
        on = self.enabled.isChecked() or self.chats.isChecked()
        self.days.setEnabled(on)
        self.gb.setEnabled(on)

    def values(self) -> dict[str, object]:
        return {"recording_enabled": self.enabled.isChecked(), "record_chats": self.chats.isChecked(),
                "retention_days": self.days.value(), "max_storage_gb": self.gb.value()}
