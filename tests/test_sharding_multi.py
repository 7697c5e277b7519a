"""benchprof.stages.sharding with two real processes (torchrun, gloo, CPU) against one process.

DeepSpeed ZeRO-3 over 2 ranks, and ddp where the ranks get unequal numbers of batches (one rank
none at all). Both go through the command line, as a user launches them. Each result must equal
the one-process importance to 1e-5 relative; a lost batch, a rank counted twice or a mean over
ranks instead of a sum moves the result by far more (checked below on the same batches).
"""

import functools

import pytest
import torch
from test_finetune import ABILITY, KEYS, assert_matches, read_importance, records, reference_importance, write_config
from test_scale import NO_SHM_KERNEL, importance_of, run_cli

from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.modeling import eligible_names, load_model
from benchprof.stages.finetune import batch_loss, encode_batches, finetune, importance_score
from benchprof.stages.sharding import accumulate_gradients, rank_batches

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, tiny_model_dir):
    """One process, strategy ddp, batches of 3 (checked against fp64 autograd in test_finetune)."""
    tmp = tmp_path_factory.mktemp("one")
    config = write_config(tmp, tiny_model_dir)
    finetune(load_config(config))
    return read_importance(Layout(load_config(config).output_root, "tiny").importance_file(ABILITY))[0]


def relative_difference(a: dict, b: dict) -> float:
    """max |a - b| / max |b| over all tensors: the measure assert_matches bounds by its rtol."""
    worst = max(float((a[n].double() - b[n].double()).abs().max()) for n in b)
    return worst / max(float(b[n].abs().max()) for n in b)


def test_tolerance_catches_a_lost_batch_or_a_mean_over_ranks(one_process, tiny_model_dir):
    """The same 10 items in the batches of 4 used below (3 batches): dropping any one batch, or
    dividing the sum by the 2 ranks, is off by orders of magnitude more than the tolerance."""
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    batches, total = encode_batches(tok, records()[:10], KEYS, 96, 4, "all")
    assert len(batches) == 3
    eligible = eligible_names([n for n, _ in model.named_parameters()], "mlp", 4)
    loss = functools.partial(batch_loss, n_loss_tokens=total)
    params = dict(model.named_parameters())

    def importance(chosen: list) -> dict:
        sums = accumulate_gradients(model, chosen, loss, eligible)
        return {n: importance_score(sums[n], params[n].detach()) for n in eligible}

    assert relative_difference(importance(batches), one_process) < TOLERANCE
    for lost in range(3):
        kept = [b for i, b in enumerate(batches) if i != lost]
        assert relative_difference(importance(kept), one_process) > 1000 * TOLERANCE
    halved = {n: v / 2 for n, v in one_process.items()}
    assert relative_difference(halved, one_process) > 1000 * TOLERANCE


def test_deepspeed_zero3_two_processes_equal_one_process(one_process, tiny_model_dir, tmp_path):
    """ZeRO-3 over 2 ranks, 3 batches of 4: rank 0 runs batches 0 and 2, rank 1 batch 1 and then a
    zero-weighted padding batch (the gathers are collective). Each rank holds half of every gradient."""
    pytest.importorskip("deepspeed")
    assert [[w for _, w in rank_batches(list(range(3)), r, 2)] for r in range(2)] == [[1.0, 1.0], [1.0, 0.0]]
    config = write_config(tmp_path, tiny_model_dir, out="zero3x2")
    done = run_cli(["finetune", str(config), "--strategy", "deepspeed", "--batch_size", "4"], 2, NO_SHM_KERNEL)
    assert done.returncode == 0, done.stderr[-3000:]
    importance, manifest = importance_of(config)
    assert manifest["strategy"] == "deepspeed" and manifest["world_size"] == 2
    assert manifest["inputs"]["batch_size"] == 4
    assert_matches(importance, one_process, rtol=TOLERANCE)
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    assert_matches(importance, reference_importance(model, tok, records()[:10], "all"), rtol=1e-4)


@pytest.mark.parametrize("batch_size", [4, 10])
def test_ddp_uneven_batches_over_two_processes_equal_one_process(one_process, tiny_model_dir, tmp_path, batch_size):
    """ddp strides batches over ranks without padding: 3 batches split 2 + 1, and 1 batch split
    1 + 0 (rank 1 runs no backward at all and still joins the all-reduce with zeros)."""
    config = write_config(tmp_path, tiny_model_dir, out=f"ddp{batch_size}")
    done = run_cli(["finetune", str(config), "--batch_size", str(batch_size)], 2)
    assert done.returncode == 0, done.stderr[-3000:]
    importance, manifest = importance_of(config)
    assert manifest["strategy"] == "ddp" and manifest["world_size"] == 2
    assert manifest["inputs"]["batch_size"] == batch_size
    assert_matches(importance, one_process, rtol=TOLERANCE)
    assert all(v.dtype == torch.float32 for v in importance.values())
