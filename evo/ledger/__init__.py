"""The ledger: where a campaign's attempts live, one module per concern.

* storage.py: ``open_ledger(url, ...)``, the one place a storage is chosen (by its URL) and opened;
* ledger.py: ``Ledger``, one Optuna study per campaign (SQLite or PostgreSQL), each write that must not be seen
  half-done one transaction; its side studies (replay, selfcheck); memory_ledger.py: the search bench's, in memory;
* the Optuna layer: rdb.py (the RDB storage opened, one-line errors), rows.py (the ledger's own writes on Optuna's
  tables), outcome.py (an attempt's trial state and value), view.py (champion and taken genomes), and
  optuna_private.py, the only module that touches Optuna's private API (tests/test_optuna_private.py);
* file safety: sqlite_file.py (the SQLite file checked, a killed writer's journal rolled back, made whole),
  audit.py (the key records verified on every open), sessions.py (trials held with Optuna's heartbeat, one live
  ``evo run`` per campaign, owners' liveness through evo/core/liveness.py), reserve.py (shared mode's genome and
  budget reservations);
* storage_url.py: storage URLs built and read in one place.
"""
