"""``python -m spacl.experiments.spacl_bench``."""

from spacl.experiments.spacl_bench import main

main()
