"""The ``kvplan`` command line: parses arguments, calls the library, renders. No arithmetic here."""
