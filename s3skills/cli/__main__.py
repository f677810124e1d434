"""`python -m s3skills.cli`: the same as the `s3skills` console script."""

import sys

from s3skills.cli import main

sys.exit(main())
