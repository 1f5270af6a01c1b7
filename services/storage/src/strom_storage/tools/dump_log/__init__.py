"""``strom dump-log``: print and check the files of a partition directory, read-only.

The counterpart of Kafka's ``kafka-dump-log.sh`` for Strom's segment ``.log`` files, their
``.index`` and ``.timeindex`` files, producer-state ``.snapshot`` files and the checkpoint
files (usage: ``docs/dump-log.md``). Every format is read by the code that defines it
(``strom.records``, ``strom_storage.log``); this package only walks files, locates where they
break, and renders what it found. Files are opened read-only and never mapped, so a running
node's files can be dumped.

::

    status = dump_files([Path("00000000000000000000.log")], DumpOptions(), sys.stdout)
    for item in dump_file(path, DumpOptions(print_data_log=True)): ...

The command line is the client's ``strom dump-log`` (``python -m strom_storage.tools.dump_log``
runs the same).
"""

from strom_storage.tools.dump_log.dump import (
    EXIT_OK,
    EXIT_PROBLEMS,
    DumpLogError,
    DumpOptions,
    dump_file,
    dump_files,
)

__all__ = ["EXIT_OK", "EXIT_PROBLEMS", "DumpLogError", "DumpOptions", "dump_file", "dump_files"]
