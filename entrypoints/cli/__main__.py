"""`python -m entrypoints.cli ...` is `wsfleet ...` (the demo starts its processes this way, so
they run on the same interpreter whatever PATH says)."""

import sys

from entrypoints.cli.main import main

sys.exit(main())
