"""``python -S -m smoke.child ...``: the run's token first, then site-packages, then the child.

The parent writes this run's token as the first line on the child's stdin (``smoke.environment.follow``). It is read
here before ``site.main()`` searches site-packages and runs what its ``.pth`` files say: code a wheel runs at start-up
has not seen it, and an end record it writes is not taken for the child's.
"""

import site
import sys

token = sys.stdin.readline().strip()
site.main()  # what ``python`` without -S does as it starts: site-packages, .pth files, sitecustomize

from smoke.child.run import main  # noqa: E402  (after site-packages: it imports from the environment)

sys.exit(main(token=token))
