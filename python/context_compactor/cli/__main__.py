"""``python -m context_compactor.cli``: the same as the ``context-compactor`` command."""

from context_compactor.cli import main

raise SystemExit(main())
