"""``python -m smoke.artifacts PATH...`` is ``python -m smoke artifacts PATH...``: the command line goes to the one
edge (``smoke.cli``), which runs ``smoke.commands.artifacts`` on the reader ``smoke.artifacts``."""

import sys

from smoke.cli import artifacts_main

sys.exit(artifacts_main(sys.argv[1:]))
