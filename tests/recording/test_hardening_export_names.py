"""Issue 19, item 12 (export): a recording folder holding files named `..\\..\\x`, `C:x`, `CON.txt`
and the like exports as a zip whose every member name is safe to unzip on Windows too (no absolute
path, drive, `..`, backslash or device name; no two names the same ignoring case); nothing is lost."""

from __future__ import annotations

import ntpath
import re
import zipfile

import pytest

from desktop.recording.library import export_zip
from desktop.recording.zipnames import MemberNames, safe_part
from recording_samples import sample_chat

pytestmark = pytest.mark.hardening
NASTY = ["..\\..\\x", "C:x", "a\\b.txt", "CON.txt", "nul", "x.", "X", "x", " ..", "\\abs", "c:\\windows\\evil",
         "what?.txt", "tab\there"]


def unsafe(name: str) -> list[str]:
    why = []
    if "\\" in name or ":" in name:
        why.append("backslash or colon")
    if ntpath.isabs(name) or name.startswith("/") or ntpath.splitdrive(name)[0]:
        why.append("absolute or drive")
    parts = name.split("/")
    if any(p.strip(" .") == "" for p in parts):
        why.append("empty, . or ..")
    if any(re.match(r"(?i)^(con|prn|aux|nul|com\d|lpt\d)(\.|$)", p) for p in parts):
        why.append("device name")
    if any(p != p.rstrip(" .") for p in parts):
        why.append("trailing dot or space")
    return why


def test_exported_member_names_are_safe_everywhere(tmp_path):
    rec = sample_chat(tmp_path / "recordings")
    for name in NASTY:
        (rec.folder / "user_images" / name).write_text(name, encoding="utf-8")
    dest = export_zip(rec.folder, tmp_path / "out.zip")
    with zipfile.ZipFile(dest) as z:
        names = z.namelist()
        bad = {n: unsafe(n) for n in names if unsafe(n)}
        assert bad == {}
        assert len({n.casefold() for n in names}) == len(names)
        texts = sorted(z.read(n).decode() for n in names if n.split("/")[1] == "user_images" and not n.endswith(".png"))
    assert texts == sorted(NASTY)  # every file is in, under a safe name
    assert all(n.startswith(rec.folder.name + "/") for n in names)
    out = tmp_path / "unzipped"
    with zipfile.ZipFile(dest) as z:
        z.extractall(out)
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))


def test_safe_part_and_unique_names():
    assert safe_part("..") == "_" and safe_part(".") == "_" and safe_part("") == "_"
    assert safe_part("C:x") == "C_x" and safe_part("..\\..\\x") == ".._.._x" and safe_part("LPT1.log") == "_LPT1.log"
    names = MemberNames()
    assert [names.name(["r", n]) for n in ("a.txt", "A.TXT", "a.txt.", "b")] == ["r/a.txt", "r/A~2.TXT", "r/a~3.txt", "r/b"]
