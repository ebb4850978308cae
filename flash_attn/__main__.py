"""``python -m flash_attn``: see :mod:`flash_attn._cli`."""

import sys

from ._cli import main

sys.exit(main())
