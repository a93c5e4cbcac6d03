"""``python -m spacl ...`` runs the command line (also under ``torchrun -m``)."""

from spacl.cli import main

raise SystemExit(main())
