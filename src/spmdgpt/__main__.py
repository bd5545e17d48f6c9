import sys

from spmdgpt.cli import main

sys.exit(main())
