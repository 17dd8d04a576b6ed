"""``python -m kvplan``."""

from kvplan.cli.app import main

raise SystemExit(main())
