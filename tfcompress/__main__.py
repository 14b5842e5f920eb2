"""``python -m tfcompress``."""

from tfcompress.cli import main

raise SystemExit(main())
