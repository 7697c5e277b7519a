#!/usr/bin/env python
"""The figures docs/research/demo-statistics.md quotes, from a finished profile: benchprof/lab/statistics_figures.py."""

from benchprof.lab.statistics_figures import main

if __name__ == "__main__":
    main()
