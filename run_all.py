#!/usr/bin/env python
"""Execute every notebook in notebooks/ with papermill and publish them as a Jupyter Book in build/.

    .venv/bin/python run_all.py                 # full run on the committed data
    .venv/bin/python run_all.py --quick         # fast check (small sizes)
    .venv/bin/python run_all.py --only 02,04 --jobs 2 --seed 1
    .venv/bin/python run_all.py --help

The logic lives in :mod:`moralkit.book`; this file is only its command line.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from moralkit.book import main

    sys.exit(main())
