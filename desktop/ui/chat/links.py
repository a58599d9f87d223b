"""Links in replies: only web (http, https) and email (mailto) links open, and only after the user
has seen the whole address and said Open; every other scheme is shown as text."""

from __future__ import annotations

from PySide6.QtCore import QUrl, Qt
from PySide6.QtGui import QDesktopServices, QFont, QTextLayout, QTextOption
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLayout, QPlainTextEdit, QVBoxLayout, QWidget

from desktop.ui.plain import plain

OPENABLE = frozenset({"http", "https", "mailto"})


def openable(url: QUrl) -> bool:
    """Whether a link may open at all: http(s) with a host, or mailto. Relative links, file:,
    javascript:, data:, smb:, ms-msdt: and every other scheme never do."""
    if not url.isValid() or url.isRelative():
        return False
    scheme = url.scheme().lower()
    return scheme in OPENABLE and (scheme == "mailto" or bool(url.host()))


def address(url: QUrl) -> str:
    """The whole address as it will be opened: percent-encoded, host name in ASCII (punycode),
    so that look-alike or invisible characters cannot hide where a link goes."""
    return url.toString(QUrl.ComponentFormattingOption.FullyEncoded)


def site(url: QUrl) -> str:
    """"Site: example.com" for a web link; a host with non-ASCII letters is named in ASCII first,
    then as it reads ("xn--pple-43d.com, shown as аpple.com")."""
    ace, shown = url.host(QUrl.ComponentFormattingOption.FullyEncoded), url.host()
    if not ace:
        return ""
    return f"Site: {ace}" + (f", shown as {shown}" if shown != ace else "")


class _AddressBox(QPlainTextEdit):
    """The address: read-only, selectable, wrapped anywhere, as tall as it is (up to MAX_LINES,
    then it scrolls). Its size is worked out before it is shown, so the dialog never jumps."""

    MAX_LINES, WIDTH = 6, 480

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.setReadOnly(True)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAccessibleName("Link address")
        pad = int(2 * self.document().documentMargin()) + 2 * self.frameWidth()
        lines = min(_line_count(text, self.font(), self.WIDTH - pad - 4), self.MAX_LINES)
        self.setFixedSize(self.WIDTH, lines * self.fontMetrics().lineSpacing() + pad + 2)


def _line_count(text: str, font: QFont, width: int) -> int:
    """How many lines `text` takes in `font`, wrapped anywhere at `width` pixels."""
    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAnywhere)
    layout.setTextOption(option)
    layout.beginLayout()
    count = 0
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        count += 1
    layout.endLayout()
    return max(count, 1)


class LinkDialog(QDialog):
    """"Open this link?" showing the whole address (selectable, wrapped anywhere, scrollable when
    long) and, for a web link, its site. Cancel is the default; Open accepts."""

    def __init__(self, url: QUrl, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.url = url
        mail = url.scheme().lower() == "mailto"
        self.setWindowTitle("Open link?")
        layout = QVBoxLayout(self)
        layout.setSpacing(8)
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)  # as tall as the address
        question = plain(QLabel("This link from a reply opens a new email in your mail app:" if mail else
                                "This link from a reply opens in your web browser:"))
        layout.addWidget(question)
        self.address = _AddressBox(address(url))
        layout.addWidget(self.address)
        self.site = plain(QLabel())
        if not mail:
            self.site.setText(site(url))
            font = self.site.font()
            font.setBold(True)
            self.site.setFont(font)
        self.site.setVisible(bool(self.site.text()))
        layout.addWidget(self.site)
        note = plain(QLabel("Open it only if you trust where it goes."))
        note.setWordWrap(True)
        layout.addWidget(note)
        buttons = QDialogButtonBox(self)
        self.open_button = buttons.addButton("Open link", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.open_button.setAutoDefault(False)
        self.cancel_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.cancel_button.setFocus(Qt.FocusReason.OtherFocusReason)


def confirm_open(parent: QWidget | None, url: QUrl) -> LinkDialog | None:
    """Ask (window-modal, never a nested event loop) and open the link with the system's handler
    once the user says Open. Returns the dialog, or None for a link that never opens."""
    if not openable(url):
        return None
    dialog = LinkDialog(QUrl(url), parent)
    dialog.accepted.connect(lambda: QDesktopServices.openUrl(dialog.url))
    dialog.finished.connect(dialog.deleteLater)
    dialog.open()
    return dialog
