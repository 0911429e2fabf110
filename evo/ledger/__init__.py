"""The ledger: one Optuna study per campaign (ledger.py: SQLite or PostgreSQL, the only module that touches Optuna's
storage), Optuna's private API behind one module (optuna_private.py), and the in-memory storage of the search bench
(memory_ledger.py)."""
