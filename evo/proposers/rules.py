"""``python -m evo.proposers.rules``: the old path of ``python -m evo.search.rules`` (the built-in rule proposer),
kept for users' configs that name it."""

import sys

from evo.search.rules import main

if __name__ == "__main__":
    sys.exit(main())
