"""What a ledger reads as: the attempt log, status and convergence plot (logmd.py), the flat table (table.py), the
live view (progress.py) and the champion as a git-am series (export.py). Functions of recorded attempts and meta."""
