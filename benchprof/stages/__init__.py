"""stages: the pipeline, one module per command (data, finetune, extract, overlap, damage, evaluate, aggregate,
status, run) and the pieces only a stage uses (sharding of the importance pass, per-weight scores and the
selection of a region's weights, evaluate's jobs and their inputs, lm-eval tasks, the shared-prefix scorer, the
scores a profile is computed from, the preflight). Stages talk to each other through the files of the outputs
tree only; a stage may import another to learn what it declares (its outputs, its inputs), never its state.

May import: core/, abilities/, stats/ and profile/ (aggregate and overlap write the profile). Nothing of lab/
or the CLI.
"""
