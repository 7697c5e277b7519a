"""Pure statistics of benchprof: arrays in, numbers out; no files, no plots, no domain names (a cell is named by
the key its caller builds). May import: numpy, scipy and each other; nothing else of benchprof. One module per idea:

- `impact`: AIS and its variants (above chance, control-adjusted), region specificity, diagonal dominance,
  per-item scores (p_correct), chance level and the test against it.
- `resampling`: the paired bootstrap over items (clusters, strata), the two-level bootstrap against a pool of random
  draws, the item-noise parts of a mean over selections, percentile intervals, bootstrap p-values, each cell's
  generator.
- `control`: the top region against the distribution of random regions of its size, its null calibration, and
  the mean over independent selections against control regions (items, selections and draws in its variance).
- `paired`: paired tests of one region against the original (exact and clustered McNemar, the mean test).
- `multitest`: multiplicity corrections over a family of p-values (Benjamini–Hochberg, Holm).
- `power`: the minimum detectable AIS (against the original, or beyond control regions) and the items needed to
  detect one.
- `profiles`: statistics over a benchmark's ability profile (breadth, entropy of the AIS mass, similarity).
- `breadth`: a region's loss on one benchmark beyond what its damage elsewhere predicts (the claims' breadth
  control).
"""
