"""``python -m eventq.migrate import-cmdlog|export-cmdlog ...``"""

import sys

from eventq.migrate.cli import main

sys.exit(main())
