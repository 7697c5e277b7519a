"""profile: a model's profile from its result files. The rows (AIS, controls, specificity and their
statistics) built from loaded scores, the analyses over a profile (breadth, similarity, comparison across
models), the tables, the figures and the text of a cell.

May import: core/ (the layout and the result reader: what stages wrote, read through their owners) and
stats/. Nothing of stages/, lab/ or the CLI.
"""
