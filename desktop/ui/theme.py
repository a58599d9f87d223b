"""Light/dark: the Fusion style with a palette that follows the system colour scheme
(QStyleHints.colorScheme), unless settings.theme forces "light" or "dark"."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette

SCHEMES = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark, "system": Qt.ColorScheme.Unknown}
# Set on the main window, not the app: its palette() entries follow the theme.
WINDOW_CSS = """
#navBar { background: palette(alternate-base); border: none; border-right: 1px solid palette(mid);
          padding: 8px 6px; outline: 0; show-decoration-selected: 1; }
#navBar::item { padding: 4px 10px; border-radius: 6px; border: none; }
#navBar::item:hover:!selected { background: palette(midlight); }
#navBar::item:selected { background: palette(highlight); color: palette(highlighted-text); }
#loadingBanner { background: palette(alternate-base); border: none; border-bottom: 1px solid palette(mid); }
#loadingBanner[error="true"] { background: #f8d7d5; color: #7a1f1a; }
#comingSoonBadge { background: palette(highlight); color: palette(highlighted-text);
                   border-radius: 9px; padding: 2px 12px; font-weight: bold; }
#counterCard { background: palette(base); border: 1px solid palette(mid); border-radius: 8px; }
#counterValue { font-size: 13pt; font-weight: bold; }
#adminPanel QHeaderView::section { padding: 4px 8px; border: none; border-bottom: 1px solid palette(mid);
                                   background: palette(button); font-weight: bold; }
#adminPanel QTableView { border: 1px solid palette(mid); }
#adminPanel QTableView::item { padding: 0px 8px; }
#sectionTitle { font-weight: bold; margin-top: 6px; }
"""


def effective_scheme(theme: str) -> Qt.ColorScheme:
    """What the user sees: a forced theme, else what the platform reports (light if unknown)."""
    forced = SCHEMES.get(theme, Qt.ColorScheme.Unknown)
    if forced != Qt.ColorScheme.Unknown:
        return forced
    system = QGuiApplication.styleHints().colorScheme()
    return Qt.ColorScheme.Dark if system == Qt.ColorScheme.Dark else Qt.ColorScheme.Light


def apply_theme(app: QGuiApplication, theme: str) -> Qt.ColorScheme:
    """Ask the platform for the scheme (Qt ≥ 6.8) and set the matching Fusion palette ourselves,
    because several platform themes ignore the request. Returns the scheme applied."""
    hints = app.styleHints()
    if hasattr(hints, "setColorScheme"):
        hints.setColorScheme(SCHEMES.get(theme, Qt.ColorScheme.Unknown))
    scheme = effective_scheme(theme)
    app.setPalette(dark_palette() if scheme == Qt.ColorScheme.Dark else light_palette())
    return scheme


def light_palette() -> QPalette:
    from PySide6.QtWidgets import QApplication

    style = QApplication.style()
    pal = style.standardPalette() if style is not None else QPalette()
    pal.setColor(QPalette.ColorRole.Highlight, QColor("#3a6fd8"))
    return pal


def dark_palette() -> QPalette:
    pal = QPalette()
    colors = {
        QPalette.ColorRole.Window: "#202124", QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#17181a", QPalette.ColorRole.AlternateBase: "#2a2b2f",
        QPalette.ColorRole.ToolTipBase: "#2a2b2f", QPalette.ColorRole.ToolTipText: "#e8eaed",
        QPalette.ColorRole.Text: "#e8eaed", QPalette.ColorRole.Button: "#2d2e31",
        QPalette.ColorRole.ButtonText: "#e8eaed", QPalette.ColorRole.BrightText: "#ff6b6b",
        QPalette.ColorRole.Highlight: "#4f83e8", QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#8ab4f8", QPalette.ColorRole.PlaceholderText: "#9aa0a6",
        QPalette.ColorRole.Mid: "#3c4043", QPalette.ColorRole.Dark: "#121314",
        QPalette.ColorRole.Light: "#3c4043", QPalette.ColorRole.Midlight: "#34363a",
        QPalette.ColorRole.Shadow: "#000000",
    }
    for role, value in colors.items():
        pal.setColor(role, QColor(value))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f7378"))
    return pal
