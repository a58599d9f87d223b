"""`python -m desktop` starts Omnidesk (see desktop.cli for the options)."""

import sys

from desktop.cli import main

sys.exit(main())
