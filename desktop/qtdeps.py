"""Why the Qt window cannot start: the system libraries that Qt's X11 (xcb) platform plugin lacks,
found with `ldd` on the plugin itself, their Debian packages, and Qt's own messages sent to the log.

`python -m desktop.qtdeps missing|packages [--guess]` is what the `omnidesk` launcher calls. Nothing
here imports Qt at module level, so the check runs before Qt loads (and aborts) on a bad system.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

# Sonames whose Debian package does not follow the naming rule (Debian 12, then 13's t64 names).
_GLIB = ["libglib2.0-0", "libglib2.0-0t64"]
IRREGULAR = {"libz.so.1": ["zlib1g"], "libGLdispatch.so.0": ["libglvnd0"], "libglib-2.0.so.0": _GLIB,
             "libgthread-2.0.so.0": _GLIB, "libgobject-2.0.so.0": _GLIB, "libgio-2.0.so.0": _GLIB,
             "libgmodule-2.0.so.0": _GLIB}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$", re.MULTILINE)
_SONAME = re.compile(r"^(lib.+?)\.so\.(\d[\d.]*)$")


def qt_plugins_dir() -> Path | None:
    """PySide6's Qt/plugins folder, found without importing PySide6; None when not installed."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins"


def xcb_plugins(*, integrations: bool = True) -> list[Path]:
    """The xcb platform plugin and (optionally) its OpenGL integrations that xcb loads at start."""
    base = qt_plugins_dir()
    if base is None or not (base / "platforms" / "libqxcb.so").exists():
        return []
    found = [base / "platforms" / "libqxcb.so"]
    if integrations:
        found += sorted((base / "xcbglintegrations").glob("*.so"))
    return found


def missing_libs(paths: Iterable[Path]) -> list[str]:
    """Sonames that the dynamic linker cannot find for these files (directly or through the Qt
    libraries they load), sorted; [] when there is no `ldd` to ask."""
    paths = [str(p) for p in paths]
    ldd = shutil.which("ldd")
    if not paths or ldd is None:
        return []
    out = subprocess.run([ldd, *paths], capture_output=True, text=True, timeout=30, check=False).stdout
    return sorted(set(_NOT_FOUND.findall(out)))


def debian_candidates(soname: str) -> list[str]:
    """Debian package names that may hold `soname`, most likely first, by Debian's naming rule:
    libfoo.so.N → libfooN; a name ending in a digit takes a hyphen (libxkbcommon-x11.so.0 →
    libxkbcommon-x11-0); a version inside the name loses its hyphen (libglib-2.0.so.0 →
    libglib2.0-0); each also with the `t64` suffix of Debian 13's time_t transition."""
    if soname in IRREGULAR:
        return list(IRREGULAR[soname])
    m = _SONAME.match(soname)
    if m is None:
        return []
    base, version = m.group(1).lower().replace("_", "-"), m.group(2)
    names = [f"{base}-{version}" if base[-1].isdigit() else f"{base}{version}", f"{base}-{version}"]
    inner = re.match(r"^(.*\D)-(\d[\d.]*)$", base)
    if inner:
        names.append(f"{inner.group(1)}{inner.group(2)}-{version}")
    names = list(dict.fromkeys(names))
    return names + [f"{n}t64" for n in names]


def apt_known(names: Iterable[str]) -> set[str]:
    """Which of these names apt knows as real (not purely virtual) packages: one `apt-cache show`."""
    names = list(names)
    apt_cache = shutil.which("apt-cache")
    if not names or apt_cache is None:
        return set()
    out = subprocess.run([apt_cache, "show", "--no-all-versions", *names],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    return set(re.findall(r"^Package:\s*(\S+)", out, re.MULTILINE))


def debian_packages(sonames: Iterable[str], *, guess: bool = False,
                    known: Callable[[Iterable[str]], set[str]] | None = None) -> tuple[list[str], list[str]]:
    """(packages, unresolved sonames). A package is the first candidate that apt knows; with
    `guess`, a soname apt cannot confirm takes its first candidate instead of being unresolved."""
    sonames = list(sonames)
    have = (known or apt_known)({c for s in sonames for c in debian_candidates(s)})
    packages: list[str] = []
    unresolved: list[str] = []
    for soname in sonames:
        candidates = debian_candidates(soname)
        package = next((c for c in candidates if c in have), None)
        if package is None and guess and candidates:
            package = candidates[0]
        if package is None:
            unresolved.append(soname)
        elif package not in packages:
            packages.append(package)
    return packages, unresolved


def uses_xcb(env: Mapping[str, str] = os.environ) -> bool:
    """Whether Qt will pick its xcb (X11) plugin: on Linux with DISPLAY set, unless
    QT_QPA_PLATFORM names another platform first or a Wayland session is preferred."""
    if not sys.platform.startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip()
    if chosen:
        return chosen == "xcb"
    if env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland":
        return False
    return bool(env.get("DISPLAY"))


def platform_problem(env: Mapping[str, str] = os.environ) -> str | None:
    """A sentence saying why the X11 window cannot open (the libraries it lacks and the command
    that installs them), or None when nothing is known to be wrong."""
    if not uses_xcb(env):
        return None
    missing = missing_libs(xcb_plugins(integrations=False))
    if not missing:
        return None
    packages, unresolved = debian_packages(missing, guess=True)
    fix = (f" Install them with: sudo apt-get install {' '.join(packages)}."
           if packages and shutil.which("apt-get") else " Install them with your package manager.")
    unknown = f" No Debian package name could be derived for {', '.join(unresolved)}." if unresolved else ""
    return ("The window cannot open: Qt's X11 platform plugin (xcb) needs system libraries that are "
            f"missing: {', '.join(missing)}.{fix}{unknown}")


def route_qt_messages() -> Callable | None:
    """Send Qt's warnings and errors to the log file too: when Qt aborts (e.g. "Could not load the
    Qt platform plugin"), its last words are then in the log, not only on a terminal. Returns the
    handler it replaced (give it back to qInstallMessageHandler to undo)."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("qt")
    levels = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
              QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
              QtMsgType.QtFatalMsg: logging.CRITICAL}

    def handler(kind: QtMsgType, _context: object, message: str) -> None:
        qt_log.log(levels.get(kind, logging.WARNING), "%s", message)
        if kind == QtMsgType.QtFatalMsg:  # Qt aborts the process right after this returns
            qt_log.critical("Qt stopped the app; see the message above.")
            for h in logging.getLogger().handlers:
                h.flush()

    return qInstallMessageHandler(handler)


def main(argv: list[str] | None = None) -> int:
    """`missing`: print the xcb plugin's missing sonames (exit 1 if any). `packages [--guess]`:
    print the Debian packages to install (exit 3 naming the sonames no package was found for).
    `uses-xcb`: exit 0 when Qt would open its window through X11 here."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["uses-xcb"]:
        return 0 if uses_xcb() else 1
    missing = missing_libs(xcb_plugins())
    if args[:1] == ["missing"]:
        print("\n".join(missing))
        return 1 if missing else 0
    if args[:1] == ["packages"]:
        packages, unresolved = debian_packages(missing, guess="--guess" in args)
        print("\n".join(packages))
        if unresolved:
            print(f"omnidesk: error: no Debian package found for {', '.join(unresolved)} (needed by Qt's "
                  f"X11 plugin; tried {', '.join(c for s in unresolved for c in debian_candidates(s)) or 'no names'}). "
                  "Install the package that provides it, then run this again.", file=sys.stderr)
            return 3
        return 0
    print("usage: python -m desktop.qtdeps missing | packages [--guess] | uses-xcb", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
