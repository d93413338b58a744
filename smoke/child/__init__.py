"""What runs inside the gate's environment, in processes of its own: the child (``run``: ``python -m smoke.child``),
its exports, loads and comparison with eager, the negative control, the portable kernels, the extension imports
and library loads, and the probe. These modules import torch and executorch where they use them, and nothing the
environment lacks at their top."""
