"""The mutation tool is a top-level package of the checkout (``mutation/``), not installed."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
