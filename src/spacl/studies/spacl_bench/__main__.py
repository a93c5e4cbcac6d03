"""``python -m spacl.studies.spacl_bench``."""

from spacl.studies.spacl_bench import main

main()
