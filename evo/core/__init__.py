"""The core types: the Family interface and its discovery (family.py), Genome (genome.py), the measurement records
(records.py) and the loop's seams (protocols.py: Backend, Gate, Storage). They import nothing of evo, harness or
gates above them (pyproject's import contracts). Families import them through the public paths evo.family,
evo.genome and evo.records."""
