"""``python -m eventq.cli``: the ``eventq`` command."""

import sys

from eventq.cli.main import main

sys.exit(main())
