"""Chat-style line breaks for Markdown replies: each line of a paragraph stays a line and keeps its
leading indentation (a small model often writes code, poems and lists without a ``` fence), while
fenced code, lists, headings, quotes and tables keep their Markdown meaning.

Qt turns a Markdown hard break into a new block with paragraph spacing, so a joined line instead
ends with BREAK_MARK (a Unicode space, so emphasis next to it still works); after the import, the
view replaces the mark and the soft break's space after it by a line separator (`LINE_BREAK`)."""

from __future__ import annotations

import re

BREAK_MARK = "\u205f"  # MEDIUM MATHEMATICAL SPACE: rare in text, and Unicode whitespace to Markdown
LINE_BREAK = "\u2028"  # LINE SEPARATOR: a new line in the same paragraph
NBSP = "\u00a0"  # leading spaces as these are text, not indentation, to Markdown

_FENCE = re.compile(r"(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"#{1,6}(?:[ \t]|$)")
_RULE = re.compile(r"(?:([-*_])[ \t]*(?:\1[ \t]*){2,}|=+[ \t]*)$")  # thematic break or setext underline
_ITEM = re.compile(r"([-+*]|(\d{1,9})[.)])([ \t]+|$)")
_DELIMITER_ROW = re.compile(r"\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_SHORT_UNDERLINE = re.compile(r"-{1,2}[ \t]*$")  # under a paragraph line: a setext heading, not a list item
_PARAGRAPH = ("text", "item")  # kinds whose line a following text line continues


def _split_indent(line: str) -> tuple[int, str]:
    """The width of a line's leading blanks (tabs to stops of 4) and the rest."""
    content = line.lstrip(" \t")
    return len(line[: len(line) - len(content)].expandtabs(4)), content


def _is_table_head(content: str, next_line: str | None) -> bool:
    if next_line is None or "|" not in content or "|" not in next_line:
        return False
    return bool(_DELIMITER_ROW.match(next_line.strip()))


def _end_line(line: str) -> str:
    """`line` joined to the next: trailing blanks or a backslash break would only show as text."""
    line = line.rstrip(" \t")
    if line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2:
        line = line[:-1]
    return line + BREAK_MARK


def keep_line_breaks(source: str) -> str:
    """Markdown for `source` in which each single newline of a paragraph (or list item) outside
    code ends its line with BREAK_MARK, and the leading spaces of a paragraph line beyond its list
    indentation become NBSPs. Fenced code (closed or still streaming), indented code, headings,
    rules, tables and list markers are left as they are; a table right under a line of text gets
    the blank line that Markdown needs to see it. Pure and linear in the length of `source`."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    kinds: list[str] = []  # the kind of each line of `out`
    items: list[int] = []  # content columns of the open list items, innermost last
    fence = ""  # the opening fence's characters while inside fenced code
    kept_indent = False  # the current (or last) paragraph kept some indentation as text
    i = 0
    while i < len(lines):
        line = lines[i]
        prev = kinds[-1] if kinds else "blank"
        if fence:
            out.append(line)
            kinds.append("fenced")
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.lstrip(fence[0]):
                fence = ""
                kinds[-1] = "fence"
            i += 1
            continue
        indent, content = _split_indent(line)
        if not content:
            out.append(line)
            kinds.append("blank" if prev != "code" else "code")
            i += 1
            continue
        block = bool(_FENCE.match(content) or content.startswith(">") or _ATX.match(content)
                     or _RULE.match(content) or _ITEM.match(content))
        in_list = bool(items)
        inside = indent >= (items[-1] if items else 0)  # within the innermost open item (or no list)
        if prev in ("blank", "code") or block:
            while items and items[-1] > indent:  # a line left of an item's text closes that item
                items.pop()
        base = items[-1] if items else 0
        rel = max(0, indent - base)
        kind = "text"
        if rel >= 4:
            if prev not in _PARAGRAPH and not (prev in ("blank", "code") and kept_indent):
                kind = "code"
        elif m := _FENCE.match(content):
            if not (m.group(1)[0] == "`" and "`" in m.group(2)):
                kind, fence = "fence", m.group(1)
        elif content.startswith(">"):
            kind = "quote"
        elif _ATX.match(content):
            kind = "heading"
        elif _RULE.match(content) or (prev == "text" and inside and _SHORT_UNDERLINE.match(content)):
            kind = "rule"
        elif m := _ITEM.match(content):
            ordered, empty = m.group(2), not content[m.end():].strip()
            # only a bullet or "1." item with text may interrupt a paragraph; else it continues it
            if prev != "text" or in_list or not (empty or (ordered is not None and int(ordered) != 1)):
                kind = "bare item" if empty else "item"  # a bare marker: its text starts on the next line
                gap = len(m.group(3).expandtabs(4))
                items.append(indent + len(m.group(1)) + (gap if 1 <= gap <= 4 else 1))
        elif _is_table_head(content, lines[i + 1] if i + 1 < len(lines) else None) or (
                prev in ("table", "table-head")):
            kind = "table" if prev in ("table", "table-head") else "table-head"

        if kind == "quote":  # a run of quote lines: their text, one level down, the same way
            run = []
            while i < len(lines):
                q_indent, q_content = _split_indent(lines[i])
                if not q_content.startswith(">") or q_indent - base >= 4:
                    break
                run.append(q_content[2:] if q_content.startswith("> ") else q_content[1:])
                i += 1
            pad = " " * indent
            for inner in keep_line_breaks("\n".join(run)).split("\n"):
                out.append(f"{pad}> {inner}" if inner else f"{pad}>")
                kinds.append("quote")
            kept_indent = False
            continue
        if kind == "table-head" and prev in _PARAGRAPH:
            out.append("")
            kinds.append("blank")
        if kind == "text":
            if prev in _PARAGRAPH:
                out[-1] = _end_line(out[-1])
            else:
                kept_indent = False
            kept_indent = kept_indent or rel > 0
            line = " " * min(indent, base) + NBSP * rel + content
        elif kind != "code":
            kept_indent = False
        out.append(line)
        kinds.append(kind)
        i += 1
    return "\n".join(out)
