"""``python -m sfclab.cli``: the ``sfclab`` command."""

import sys

from . import main

sys.exit(main())
