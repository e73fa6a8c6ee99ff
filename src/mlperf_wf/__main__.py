"""``python -m mlperf_wf`` is ``mlperf-wf``."""

import sys

from mlperf_wf.cli import main

sys.exit(main())
