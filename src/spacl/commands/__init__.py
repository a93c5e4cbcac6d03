"""Sub-commands of the ``spacl`` CLI; each module exposes ``register(subparsers)``."""
