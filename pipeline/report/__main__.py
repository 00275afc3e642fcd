"""``python -m pipeline.report ...`` and ``spark-submit pipeline/report/__main__.py ...`` (with
this project installed on the driver; its executors need nothing of it)."""

import sys

from pipeline.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
