import sys

from entrypoints.worker_main import main

sys.exit(main())
