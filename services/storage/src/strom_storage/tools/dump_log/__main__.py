"""``python -m strom_storage.tools.dump_log FILE...``: the same as ``strom dump-log FILE...``
(its own command given to the ``strom`` command line, whatever the installed metadata says)."""

from __future__ import annotations

import sys

from strom.cli.main import main
from strom_storage.tools import dump_log_cli

if __name__ == "__main__":
    sys.exit(main(["dump-log", *sys.argv[1:]], servers={"dump-log": dump_log_cli.add_parsers}))
