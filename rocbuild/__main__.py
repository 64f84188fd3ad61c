"""`python -m rocbuild` runs the same CLI as the `rocbuild` console script."""

import sys

from rocbuild.cli.main import main

sys.exit(main())
