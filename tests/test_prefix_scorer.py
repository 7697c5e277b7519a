"""scoring: SharedPrefixLM gives lm-eval HFLM's log-likelihoods and greedy flags (same model object, same tokenizer)
within 1e-4 on real lm-eval requests of a multiple-choice task (0- and 3-shot), on truncated and hand-made
requests in any order, and the same per-document acc/acc_norm through simple_evaluate, while computing fewer
tokens; a model the packing does not fit falls back to HFLM's own path. On the demo model, and on SmolLM2-135M
where real/ holds it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from benchprof.core.config import ConfigError
from benchprof.core.loader import parse_config
from benchprof.stages.prefix_scorer import SharedPrefixLM, TokenTrie, pack

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "benchprof" / "assets" / "demo-model"
REAL = ROOT / "real" / "SmolLM2-135M-Instruct"
REAL_BENCHMARKS = ROOT / "real" / "benchmarks"
TOLERANCE = 1e-4

# arc_easy's schema; options that share words (a trie branch inside the continuations) and differ in length
QUESTIONS = [
    ("Which is a colour?", ["red", "the red cup", "a stone", "river"], 0),
    ("Which is an animal?", ["table", "a small cat", "a small cloud"], 1),
    ("Which is a number?", ["seven", "chair", "tree", "seventy seven"], 0),
    ("Which is a fruit?", ["rock", "pear", "a ripe pear"], 1),
    ("What do plants need to grow?", ["light and water", "light and noise", "darkness", "metal"], 0),
    ("Which object is the heaviest?", ["a feather", "a brick", "a leaf", "a coin"], 1),
    ("Where does the sun rise?", ["in the east", "in the west", "in the north"], 0),
    ("Which is a liquid at room temperature?", ["ice", "steam", "water", "sand"], 2),
    ("What does a thermometer measure?", ["mass", "temperature", "length"], 1),
    ("Which animal can fly?", ["a dog", "a fish", "a bird", "a horse"], 2),
    ("What is frozen water called?", ["ice", "fog", "rain"], 0),
    ("Which season is the coldest?", ["summer", "spring", "autumn", "winter"], 3),
]


def arc_rows(questions: list[tuple[str, list[str], int]], prefix: str) -> dict[str, list]:
    return {
        "id": [f"{prefix}{i}" for i in range(len(questions))],
        "question": [q for q, _, _ in questions],
        "choices": [{"text": options, "label": "ABCD"[: len(options)]} for _, options, _ in questions],
        "answerKey": ["ABCD"[answer] for _, _, answer in questions],
    }


@pytest.fixture(scope="module")
def arc_copy(tmp_path_factory) -> Path:
    """A local copy of arc_easy in its schema: a train split for few-shot examples and a validation split."""
    import datasets

    folder = tmp_path_factory.mktemp("arc") / "arc_easy"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict(arc_rows(QUESTIONS[8:], "train-")),
            "validation": datasets.Dataset.from_dict(arc_rows(QUESTIONS[:8], "val-")),
        }
    ).save_to_disk(str(folder))
    return folder


def local_task(tmp_path: Path, benchmark: str, copy: Path, shots: int) -> tuple[str, object]:
    """(task name, TaskManager) of lm-eval's `benchmark` re-pointed at `copy` by benchprof's dataset_paths."""
    from lm_eval.tasks import TaskManager

    from benchprof.stages import tasks

    raw = {
        "settings": {"output_dir": str(tmp_path / "out")},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {"benchmarks": [{"name": benchmark, "num_fewshot": shots}], "dataset_paths": {benchmark: str(copy)}},
    }
    folder, mapping = tasks.write_tasks(parse_config(raw, tmp_path / "config.yml"))
    return mapping[benchmark], TaskManager(include_path=str(folder), include_defaults=False)


def lm_eval_requests(task_name: str, manager: object, shots: int, limit: int) -> list:
    """The loglikelihood Instances lm-eval builds for `task_name` (a task or a group's subtask)."""
    from lm_eval.tasks import get_task_dict

    def leaves(tree: dict) -> list:
        return [t for v in tree.values() for t in (leaves(v) if isinstance(v, dict) else [v])]

    requests = []
    for task in leaves(get_task_dict([task_name], manager)):
        task.set_config(key="num_fewshot", value=shots)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(limit=limit, rank=0, world_size=1)
        requests += task.instances
    return requests


def both(model_dir: Path, batch_size: int = 4):
    """HFLM and SharedPrefixLM over one model object and tokenizer."""
    from lm_eval.models.huggingface import HFLM

    from benchprof.core.modeling import load_model

    model, tokenizer = load_model(str(model_dir), dtype="float32")
    hflm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    packed = SharedPrefixLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    return model, hflm, packed


class TokenCounter:
    """Input tokens (padding included) of every forward pass of `model`."""

    def __init__(self, model: torch.nn.Module):
        self.tokens = 0
        self.handle = model.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.tokens += ids.numel()


def assert_same(expected: list[tuple[float, bool]], got: list[tuple[float, bool]]) -> None:
    assert len(got) == len(expected)
    worst = max(abs(e[0] - g[0]) for e, g in zip(expected, got))
    assert worst <= TOLERANCE, worst
    assert [g[1] for g in got] == [e[1] for e in expected]


@pytest.fixture(scope="module")
def demo():
    return both(DEMO)


@pytest.mark.parametrize("shots", [0, 3])
def test_arc_requests_score_as_hflm_with_fewer_tokens(demo, arc_copy, tmp_path, shots):
    model, hflm, packed = demo
    name, manager = local_task(tmp_path, "arc_easy", arc_copy, shots)
    requests = lm_eval_requests(name, manager, shots, limit=None)
    assert len(requests) == sum(len(options) for _, options, _ in QUESTIONS[:8])
    packed.loglikelihood(requests[:4], disable_tqdm=True)  # its one-time check (an HFLM pass) is not counted below
    counter = TokenCounter(model)
    expected = hflm.loglikelihood(requests, disable_tqdm=True)
    hflm_tokens, counter.tokens = counter.tokens, 0
    got = packed.loglikelihood(requests, disable_tqdm=True)
    assert_same(expected, got)
    assert packed.packing_checked and packed.packing_works  # the packed path ran and passed its own check
    # each question's context is computed once instead of once per option (3-shot: long shared contexts)
    counter.handle.remove()
    assert counter.tokens < (0.6 if shots else 0.8) * hflm_tokens, (counter.tokens, hflm_tokens)
    # any order in, the same answers back in that order
    order = list(range(len(requests)))
    random.Random(0).shuffle(order)
    assert_same([expected[i] for i in order], packed.loglikelihood([requests[i] for i in order], disable_tqdm=True))


def test_requests_are_tokenised_once_for_every_variant(demo, arc_copy, tmp_path):
    """A second scoring of the same requests (another variant of a run) tokenises nothing and gives what a fresh
    scorer gives: the memo of _encode_pair holds exactly HFLM's tokens."""
    from benchprof.stages.damage import ablated

    model, hflm, _ = demo
    packed = SharedPrefixLM(pretrained=model, tokenizer=hflm.tokenizer, batch_size=4)
    requests = lm_eval_requests(*local_task(tmp_path, "arc_easy", arc_copy, 0), 0, limit=6)
    first = packed.loglikelihood(requests, disable_tqdm=True)
    assert len(packed.encoded) == len(requests)
    assert all(packed.encoded[r.args] == hflm._encode_pair(*r.args) for r in requests)
    calls = []
    original = packed.tok_encode
    packed.tok_encode = lambda *a, **k: calls.append(a) or original(*a, **k)  # type: ignore[method-assign]
    name, weight = next((n, p) for n, p in model.named_parameters() if "mlp.down_proj" in n)
    with ablated(model, {name: torch.arange(0, weight.numel(), 7)}):  # another variant: other scores
        second = packed.loglikelihood(requests, disable_tqdm=True)
    again = packed.loglikelihood(requests, disable_tqdm=True)
    assert calls == [] and again == first and second != first
    fresh = SharedPrefixLM(pretrained=model, tokenizer=hflm.tokenizer, batch_size=4)
    assert fresh.loglikelihood(requests, disable_tqdm=True) == first


def test_truncated_overlapping_and_duplicate_requests(demo):
    """Token-level requests: a context longer than max_length (left-truncated, so its options no longer share a
    prefix), one exactly at max_length + 1 tokens (not truncated), a context that is another request's context
    + part of its continuation, duplicates and one-token continuations, in shuffled order; cache hook called.
    The reference is HFLM's plain path (logits_cache=False): its default one-token cache is wrong on one of them."""
    model, hflm, packed = demo
    n = hflm.max_length
    rng = random.Random(1)

    def tokens(k: int) -> list[int]:
        return [rng.randrange(3, 900) for _ in range(k)]

    long_context, short, mid = tokens(n + 40), tokens(12), tokens(30)
    cont_a, cont_b = tokens(5), tokens(3)
    requests = [
        (("long", "a"), long_context, cont_a),
        (("long", "b"), long_context, cont_b),
        (("long", "c"), long_context, cont_a[:1]),
        (("edge", "a"), mid[:1] + tokens(n - 4), tokens(4)),  # n + 1 tokens: no truncation
        (("short", "a"), short, cont_a),
        (("short", "b"), short, cont_a[:2] + cont_b),  # shares the first continuation's first tokens
        (("short+", "a"), short + cont_a[:2], cont_b),  # the same sequence as the one above
        (("short", "a"), short, cont_a),  # a duplicate
        (("short", "1"), short, cont_b[:1]),
        (("mid", "a"), mid, tokens(1)),
        (("mid", "b"), mid, tokens(7)),
    ]
    rng.shuffle(requests)
    assert sum(len(c) + len(x) > n + 1 for _, c, x in requests) == 3
    added = []

    class Hook:
        def add_partial(self, kind, key, value):
            added.append((kind, key, value))

    packed.cache_hook = Hook()
    got = packed._loglikelihood_tokens(requests, disable_tqdm=True)
    from lm_eval.models.huggingface import HFLM

    plain = HFLM(pretrained=model, tokenizer=hflm.tokenizer, batch_size=4, logits_cache=False)
    expected = plain._loglikelihood_tokens(requests, disable_tqdm=True)
    assert_same(expected, got)
    # HFLM's one-token cache (logits_cache, on by default) scores requests with the same context + continuation[:-1]
    # from one forward pass but gathers the shorter continuation's log-probs at the first positions instead of the
    # last (lm-eval 0.4.13): wrong for 'short+' here; every other request is HFLM's
    cached = hflm._loglikelihood_tokens(requests, disable_tqdm=True)
    wrong = [key for (key, _, _), e, c in zip(requests, expected, cached) if abs(e[0] - c[0]) > TOLERANCE]
    assert wrong == [("short+", "a")]
    assert sorted(added) == sorted(("loglikelihood", key, answer) for (key, _, _), answer in zip(requests, got))


def test_the_trie_shares_prefixes_and_masks_other_branches():
    trie = TokenTrie()
    trie.add(0, [5, 6, 7], 2)
    trie.add(1, [5, 6, 8, 9], 3)
    trie.add(2, [5, 6], 1)
    assert trie.tokens == [5, 6, 7, 8, 9] and trie.parents == [-1, 0, 1, 1, 3] and trie.depths == [0, 1, 2, 2, 3]
    assert trie.scored == [(0, [1, 2]), (1, [1, 3, 4]), (2, [1])]
    allowed = trie.ancestors()
    assert allowed[4].tolist() == [True, True, False, True, True]  # 9 sees 5 6 8 and itself, not the branch 7
    assert allowed[2].tolist() == [True, True, True, False, False]
    # options join their question's row; a question sharing a third of its tokens or less starts its own
    requests = [(None, [1, 2, 3, 4], [9]), (None, [1, 2, 3, 4], [8, 8]), (None, [1, 7, 7, 7, 7], [9])]
    rows = pack(requests, [c + x[:-1] for _, c, x in requests], row_tokens=100)
    assert [sorted(r for r, _ in row.scored) for row in rows] == [[0, 1], [2]]


def test_simple_evaluate_gives_hflms_per_document_metrics(demo, arc_copy, tmp_path):
    import lm_eval

    _, hflm, packed = demo
    name, manager = local_task(tmp_path, "arc_easy", arc_copy, 3)
    runs = [
        lm_eval.simple_evaluate(
            model=lm,
            tasks=[name],
            num_fewshot=3,
            log_samples=True,
            task_manager=manager,
            random_seed=0,
            numpy_random_seed=0,
            torch_random_seed=0,
            fewshot_random_seed=0,
        )
        for lm in (hflm, packed)
    ]
    expected, got = (sorted(run["samples"][name], key=lambda s: s["doc_id"]) for run in runs)
    assert [s["doc_id"] for s in got] == list(range(8))
    for e, g in zip(expected, got):
        assert (g["acc"], g["acc_norm"]) == (e["acc"], e["acc_norm"])
        assert [r[0] for r in g["filtered_resps"]] == pytest.approx([r[0] for r in e["filtered_resps"]], abs=TOLERANCE)
    assert runs[1]["results"][name]["acc,none"] == runs[0]["results"][name]["acc,none"]


def test_a_model_the_packing_does_not_fit_falls_back_to_hflm(arc_copy, tmp_path, monkeypatch):
    """Packed answers that disagree with HFLM's (as a model ignoring the mask would give) are caught by the
    one-time check: the call is answered by HFLM's path, and so is every later one."""
    _, hflm, packed = both(DEMO)
    name, manager = local_task(tmp_path, "arc_easy", arc_copy, 0)
    requests = lm_eval_requests(name, manager, 0, limit=None)
    score_rows = SharedPrefixLM.score_rows

    def off_by_one(self, rows, requests):
        return [(i, (logprob + 1.0, greedy)) for i, (logprob, greedy) in score_rows(self, rows, requests)]

    monkeypatch.setattr(SharedPrefixLM, "score_rows", off_by_one)
    expected = hflm.loglikelihood(requests, disable_tqdm=True)
    assert_same(expected, packed.loglikelihood(requests, disable_tqdm=True))
    assert packed.packing_checked and not packed.packing_works
    assert_same(expected, packed.loglikelihood(requests, disable_tqdm=True))


def test_the_scorer_is_validated_and_enters_the_job_inputs(tmp_path):
    raw = {"settings": {"output_dir": "out"}, "models": [{"name": "m"}], "datasets": [{"name": "Spatial_Reasoning"}]}
    assert parse_config(raw, tmp_path / "c.yml").evals.scorer == "shared_prefix"
    with pytest.raises(ConfigError, match="evals.scorer: 'fast' is not one of shared_prefix, lm_eval"):
        parse_config({**raw, "evals": {"scorer": "fast"}}, tmp_path / "c.yml")
    from benchprof.core.layout import Layout, Variant
    from benchprof.stages.eval_jobs import Job, JobInputs

    inputs = {}
    for scorer in ("shared_prefix", "lm_eval"):
        cfg = parse_config({**raw, "models": [{"name": str(DEMO)}], "evals": {"scorer": scorer}}, tmp_path / "c.yml")
        spec = cfg.models[0]
        job_inputs = JobInputs(cfg, spec, Layout(cfg.output_root, spec.tag), tmp_path, {"b": "b"}, "hf", None)
        inputs[scorer] = job_inputs(Job(Variant(), "b"))
    assert inputs["shared_prefix"]["scorer"] == "shared_prefix" and inputs["lm_eval"]["scorer"] == "lm_eval"
    assert {k for k in inputs["lm_eval"] if inputs["lm_eval"][k] != inputs["shared_prefix"][k]} == {"scorer"}


@pytest.mark.slow
@pytest.mark.skipif(not (REAL / "config.json").is_file(), reason="real/SmolLM2-135M-Instruct not fetched")
@pytest.mark.skipif(not (REAL_BENCHMARKS / "mmlu").is_dir(), reason="real/benchmarks/mmlu not fetched")
def test_smollm2_scores_as_hflm_on_arc_few_shot_and_mmlu_five_shot(arc_copy, tmp_path):
    """SmolLM2-135M: 3-shot ARC-style requests and 5-shot MMLU (first_n examples: the questions of a subject
    share their prefix, packed into one row) within 1e-4 of HFLM, fewer tokens computed. One torch thread: on a
    loaded 2-core machine two threads stall at every operation (docs/research/performance.md, section 4)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        compare_on_smollm2(arc_copy, tmp_path)
    finally:
        torch.set_num_threads(threads)


def compare_on_smollm2(arc_copy: Path, tmp_path: Path) -> None:
    model, hflm, packed = both(REAL)
    name, manager = local_task(tmp_path, "arc_easy", arc_copy, 3)
    requests = lm_eval_requests(name, manager, 3, limit=2)
    name, manager = local_task(tmp_path / "mmlu", "mmlu", REAL_BENCHMARKS / "mmlu", 5)
    requests += lm_eval_requests(f"{name}__mmlu_astronomy", manager, 5, limit=4)
    packed.loglikelihood(requests[:4], disable_tqdm=True)  # its one-time check (an HFLM pass) is not counted below
    counter = TokenCounter(model)
    expected = hflm.loglikelihood(requests, disable_tqdm=True)
    hflm_tokens, counter.tokens = counter.tokens, 0
    assert_same(expected, packed.loglikelihood(requests, disable_tqdm=True))
    assert packed.packing_checked and packed.packing_works
    counter.handle.remove()
    assert counter.tokens < 0.5 * hflm_tokens, (counter.tokens, hflm_tokens)
