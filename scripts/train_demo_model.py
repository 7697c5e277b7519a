#!/usr/bin/env python
"""Train benchprof's demo model: benchprof/lab/demo_model.py (`--help`)."""

from benchprof.lab.demo_model import main

if __name__ == "__main__":
    main()
