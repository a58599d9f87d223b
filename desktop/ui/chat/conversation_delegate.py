"""How a row of the conversation list is drawn: the title (with its icon, if the model gives
one) and its date, and under it a quieter line: while searching the text that matched, else how
many messages it has."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QIcon, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from desktop.ui.chat.conversation_model import DATE_ROLE, DETAIL_ROLE
from desktop.ui.style import blend

PAD_X, PAD_Y, GAP = 8, 5, 1
Index = QModelIndex | QPersistentModelIndex


def detail_font(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(font.pointSizeF() - 1.0, 7.0))
    return small


class ConversationDelegate(QStyledItemDelegate):
    """Two lines per row; the rename editor covers the title line only."""

    def _title_rect(self, option: QStyleOptionViewItem) -> QRect:
        height = QFontMetrics(option.font).height()
        r = option.rect
        return QRect(r.left() + PAD_X, r.top() + PAD_Y, r.width() - 2 * PAD_X, height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        widget: QWidget | None = opt.widget
        style = widget.style() if widget is not None else None
        painter.save()
        if style is not None:
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        text_color = opt.palette.color(role)
        back = opt.palette.color(QPalette.ColorRole.Highlight if selected else QPalette.ColorRole.Base)
        title = self._title_rect(opt)
        if not opt.icon.isNull():
            side = title.height()
            opt.icon.paint(painter, QRect(title.left(), title.top(), side, side), Qt.AlignmentFlag.AlignCenter,
                           QIcon.Mode.Selected if selected else QIcon.Mode.Normal)
            title.setLeft(title.left() + side + 4)
        small = detail_font(opt.font)
        sfm, quiet = QFontMetrics(small), blend(text_color, back, 0.38)
        date = str(index.data(DATE_ROLE) or "")
        if date:  # right-aligned on the title line; the title gives way
            painter.setFont(small)
            painter.setPen(quiet)
            painter.drawText(title, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, date)
            title.setRight(title.right() - sfm.horizontalAdvance(date) - 8)
        painter.setFont(opt.font)
        painter.setPen(text_color)
        fm = QFontMetrics(opt.font)
        painter.drawText(title, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(opt.text, Qt.TextElideMode.ElideRight, title.width()))
        detail = str(index.data(DETAIL_ROLE) or "")
        if detail:
            r = self._title_rect(option)
            line = QRect(r.left(), r.bottom() + 1 + GAP, r.width(), sfm.height())
            painter.setFont(small)
            painter.setPen(quiet)
            painter.drawText(line, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             sfm.elidedText(" ".join(detail.split()), Qt.TextElideMode.ElideRight, line.width()))
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        fm, sfm = QFontMetrics(option.font), QFontMetrics(detail_font(option.font))
        return QSize(120, PAD_Y + fm.height() + GAP + sfm.height() + PAD_Y)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: Index) -> None:
        r = self._title_rect(option)
        editor.setGeometry(r.adjusted(-4, -3, 4, 3))
