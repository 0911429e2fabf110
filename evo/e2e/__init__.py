"""Real-engine decode commands for the end-to-end gate (evo/measure/e2e.py runs them).

``python -m evo.e2e.hf``: a Hugging Face transformers Llama-family model (seeded random weights, or a local
checkpoint) decoding greedily, with a fused add RMSNorm family's kernel in every layer (hf.py; the hook in
norm_hook.py, the profile in hf_profile.py). transformers is an optional dependency (the ``e2e`` extra); nothing
here is imported by the rest of evo.
"""
