"""python -m ark_trainer"""

import sys

from ark_trainer.cli import main

sys.exit(main())
