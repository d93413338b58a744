"""``python -S -m smoke.child ...``: the run's token first, then site-packages, then the child.

The parent writes the run's token as the first line on the child's stdin (``smoke.environment.follow``). It is read
before ``site.main()`` runs the ``.pth`` files, so start-up code a wheel runs has not seen it, and an end record that
code writes is not taken for the child's. It is a local of ``_child``, not a module global: code of the wheel that
the child imports finds no ``token`` among its modules' names (it could still search the process's frames and memory:
docs/checks.md says what a hostile wheel can do, and what the parent checks itself).
"""

import gc
import site
import sys


def _child() -> int:
    token = sys.stdin.readline().strip()
    site.main()  # what ``python`` without -S does as it starts: site-packages, .pth files, sitecustomize

    from smoke.child.run import main  # (after site-packages: it imports from the environment)

    return main(token=token)


code = _child()
# Its end record is written and every process it started has ended; the parent waits for its exit, which is judged
# (a crash while the interpreter and the libraries tear down fails `child process`). That teardown took over a second
# of the CPU row's time (issue 35), most of it the cyclic collector walking every object torch and the exporter made:
# frozen, they are left to the exit; every module is still torn down, every atexit handler and destructor still runs.
gc.freeze()
sys.exit(code)
