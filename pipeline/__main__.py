"""``python -m pipeline <job> ...``: what ``streamgate pipeline`` and ``streamgate bench spark`` run
(gateway/cli.py hands over to it by exec: the gateway never imports the pipeline)."""

import sys

from pipeline.cli import main

sys.exit(main())
