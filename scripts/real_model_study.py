#!/usr/bin/env python
"""The studies of docs/research/real-model.md beside the main SmolLM2 profile: benchprof/lab/real_study.py
(`--help`)."""

import fire

from benchprof.lab.real_study import main

if __name__ == "__main__":
    fire.Fire(main)
