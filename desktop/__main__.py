"""`python -m desktop` starts Omnidesk (see desktop.cli for the options). A library that cannot be
loaded at start (e.g. PySide6 without the system's libEGL.so.1) ends in a sentence and the log."""

import sys

from desktop.cli import main

try:
    code = main()
except ImportError as exc:  # raised by the first import of Qt or torch, inside main()
    from desktop.logs import log_failure, setup_logging

    setup_logging()
    try:  # qasync hides Qt's own import error behind "No Qt implementations found"
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as qt_exc:
        exc = qt_exc
    hint = (" Run `./omnidesk start` as root to install the missing system packages, or see Troubleshooting "
            "in the README." if "shared object file" in str(exc) else "")  # the dynamic linker's words
    code = log_failure(f"Omnidesk could not start: {type(exc).__name__}: {exc}.{hint}", exc)
sys.exit(code)
