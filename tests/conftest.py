"""Shared fixtures: offline environment, a tiny model built by project code."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A random tiny Llama + BPE tokenizer saved with save_pretrained (built once per session)."""
    from benchprof.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)
