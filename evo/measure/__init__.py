"""What a campaign measures besides the gates/ package: the copy ceiling (ceiling.py), the end-to-end decode hook
(e2e.py), decode profiles (profile.py) and the compute-sanitizer pass (sanitize.py; its target process is
``python -m evo.sanitize_target``)."""
