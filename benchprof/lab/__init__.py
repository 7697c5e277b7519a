"""lab: the studies that check the method rather than run it. Planted models (ground truths built into the
demo model and into SmolLM2), the validation study against them, the real-model study, the demo model's
training, the GPU self-check, the fetch of the real model and benchmark copies, and a profile re-derived from
its per-document scores.

May import anything in benchprof; nothing imports the lab but the CLI and the thin wrappers in scripts/.
"""
