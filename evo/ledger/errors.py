"""The ledger's one error for users (its own module: evo/ledger/sqlite_file.py and the Optuna adapter both raise it)."""


class LedgerError(Exception):
    """The storage cannot be used as this campaign's ledger (one line for the user; nothing was written)."""
