"""core: what every stage stands on. The typed config, its YAML loader and schema, a command line's selections,
the outputs layout (every path), atomic storage and manifests, locks, the console, model loading and
fingerprints, the region file format, the result file format and the chat prompt of an item.

May import: the package root (BenchprofError), abilities/ (the ability registry) and stats/. Nothing of
stages/, profile/, lab/ or the CLI.
"""
