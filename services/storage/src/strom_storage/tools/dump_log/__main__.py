"""``python -m strom_storage.tools.dump_log FILE...``: the same as ``strom dump-log FILE...``."""

from __future__ import annotations

import sys

from strom.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["dump-log", *sys.argv[1:]]))
