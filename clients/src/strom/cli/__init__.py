"""The ``strom`` command line."""
