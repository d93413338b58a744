import sys

from smoke.child.run import main

sys.exit(main())
