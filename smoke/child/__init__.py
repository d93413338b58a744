"""What runs inside the gate's environment, in processes of its own: the child (``run``: ``python -m smoke.child``),
its exports, loads and comparison with eager (``exports``, ``models``), the negative control, the portable
kernels, every extension module's import and every library's load, and the probe of the environment. These
modules import torch and executorch where they use them, and nothing the wheel's environment lacks at their top."""
