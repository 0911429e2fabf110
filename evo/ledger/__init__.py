"""The ledger: one Optuna study per campaign (ledger.py: SQLite or PostgreSQL, the only module that touches Optuna's
storage), its SQLite file checked before it is opened (sqlite_file.py), its key records verified on every open
(audit.py), storage URLs built and read in one place (storage_url.py), Optuna's private API behind one module
(optuna_private.py), and the in-memory storage of the search bench (memory_ledger.py)."""
