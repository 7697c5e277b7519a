"""Manifests record each output file's size and content hash; a truncated or edited output is never
trusted: the skip check recomputes it, status calls it damaged, aggregate refuses it (issue 22)."""

from __future__ import annotations

import os
import shutil

import pytest
from test_reliability import ABILITY, K, write_config

from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.core.locks import folder_lock
from benchprof.core.storage import content_record, matches_record, shared_mode, write_csv
from benchprof.stages.aggregate import load_scores
from benchprof.stages.evaluate import evaluate
from benchprof.stages.finetune import finetune
from benchprof.stages.run import run
from benchprof.stages.status import plan_status


@pytest.fixture(scope="module")
def finished(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("storage")
    run(load_config(write_config(folder, tiny_model_dir)))
    return folder


def copy(finished, tmp_path, tiny_model_dir):
    shutil.copytree(finished / "outputs", tmp_path / "outputs")
    shutil.copytree(finished / "data", tmp_path / "data")
    config = write_config(tmp_path, tiny_model_dir)
    return config, Layout(tmp_path / "outputs", "tiny")


def state(config, stage: str, what: str) -> tuple[str, str]:
    return next((i.state, i.why) for i in plan_status(load_config(config)) if (i.stage, i.what) == (stage, what))


def same_size_edit(path, offset: int) -> None:
    """Flip one byte in place and put the mtime back, as a careless tool (or person) might."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_same_size_edit_with_the_mtime_put_back_is_seen_in_any_file_size(tmp_path):
    """Files over 64 MiB were hashed on 64 sampled blocks: a 4 KiB edit between them kept the record."""
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"abc\n" * 100)
    large.write_bytes(bytes(range(256)) * (100 * 2**20 // 256))  # 100 MiB
    for path, offset in ((small, 7), (large, 37 * 2**20 + 12345)):
        record = content_record(path)
        assert record["size"] == path.stat().st_size and matches_record(path, record)
        same_size_edit(path, offset)
        assert not matches_record(path, record)
        same_size_edit(path, offset)  # the bytes are back: a copy's content is the same file
        assert matches_record(path, record)
        path.write_bytes(path.read_bytes()[:-1])
        assert not matches_record(path, record)
    assert not matches_record(tmp_path / "gone", content_record(small))


def test_a_copied_or_moved_file_matches_its_record_by_content(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(os.urandom(1000))
    record = content_record(path)
    copied = tmp_path / "b"
    shutil.copy2(path, copied)  # cp -a: same mtime, new inode and ctime
    assert matches_record(copied, record)
    copied.write_bytes(os.urandom(1000))
    assert not matches_record(copied, record)


def test_a_damaged_checkpoint_is_listed_stale_and_rewritten(finished, tmp_path, tiny_model_dir, capsys):
    """A checkpoint whose weights were truncated or deleted was kept ("0 written, 1 current kept"), and
    `status` did not list checkpoints; with backend vllm it is what gets evaluated."""
    from benchprof.stages.damage import damage

    config, layout = copy(finished, tmp_path, tiny_model_dir)

    def checkpoint_state() -> list[tuple[str, str]]:
        return [(i.state, i.why) for i in plan_status(load_config(config)) if i.stage == "checkpoint"]

    assert checkpoint_state() == []  # backend hf: optional, not listed before one is written
    damage(load_config(config), region="top", save=True)
    assert checkpoint_state() == [("done", "")]
    weights = layout.damaged_dir(ABILITY, K, "top") / "model.safetensors"
    whole = weights.read_bytes()
    leftover = weights.parent.parent / ".top.killed.benchprof.tmp"  # what a save killed halfway leaves
    for harm, why in (
        (lambda: weights.write_bytes(whole[:5000]), "damaged model.safetensors (not the file its manifest recorded)"),
        (weights.unlink, "missing model.safetensors"),
    ):
        leftover.mkdir()
        (leftover / "model.safetensors").write_bytes(whole[:100])
        harm()
        assert checkpoint_state() == [("stale", why)]
        capsys.readouterr()
        damage(load_config(config), region="top", save=True)
        assert "1 checkpoint(s) written, 0 current kept" in capsys.readouterr().out
        assert weights.read_bytes() == whole and checkpoint_state() == [("done", "")]
        assert not leftover.exists()
    leftover.mkdir()  # beside a current checkpoint (a killed --force): removed, nothing rewritten
    damage(load_config(config), region="top", save=True)  # but only by the holder of the folder's lock
    assert "0 checkpoint(s) written, 1 current kept" in capsys.readouterr().out and leftover.exists()
    with folder_lock(layout.model_dir, "benchprof damage"):  # as the command line holds it
        damage(load_config(config), region="top", save=True)
    assert "0 checkpoint(s) written, 1 current kept" in capsys.readouterr().out and not leftover.exists()


def test_a_job_another_live_process_scores_is_left_to_it(finished, tmp_path, tiny_model_dir, capsys):
    """`evaluate --shard` beside `benchprof run` ran every job twice: the lock was the model folder's, which
    shards do not take. Each job now has its own lock; a killed holder's lock is free again."""
    import signal
    import subprocess
    import sys

    config, layout = copy(finished, tmp_path, tiny_model_dir)
    variant = Variant(ABILITY, K, "top")
    result = layout.eval_file(variant, ABILITY)
    result.unlink()  # this job is to do again
    lock = layout.job_lock(variant, ABILITY)
    code = (
        "import sys, time; from benchprof.core.locks import job_lock\n"
        f"with job_lock({str(lock)!r}, 'benchprof evaluate') as mine:\n"
        "    print(mine, flush=True); time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "True"
        capsys.readouterr()
        evaluate(load_config(config))
        out = capsys.readouterr().out
        assert "0 jobs run" in out and "1 left to another process" in out and not result.exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # killed: its lock file stays behind, held by no one
        holder.wait()
    assert lock.exists()
    evaluate(load_config(config))
    assert "1 jobs run" in capsys.readouterr().out and result.is_file()
    assert not lock.exists()


def test_two_processes_taking_a_free_lock_at_once_never_both_hold_it(tmp_path):
    """The takeover of a dead holder's lock was read, unlink, create: two processes that both read the dead
    record could each remove the other's new lock and both run. Many processes race for one stale lock,
    again and again; each round exactly one holds it."""
    import json
    import socket
    import subprocess
    import sys

    lock = tmp_path / "job.lock"
    code = (
        "import os, sys, time; from benchprof.core.locks import job_lock\n"
        "start = float(sys.argv[2])\n"
        "while time.time() < start: pass\n"
        "with job_lock(sys.argv[1], 'benchprof evaluate') as mine:\n"
        "    print(mine, flush=True); time.sleep(0.5)\n"
    )
    for host in [socket.gethostname(), socket.gethostname(), "another-host"]:
        # a killed holder's record; one from another host (a shared file system) was never taken over
        lock.write_text(json.dumps({"pid": 999999999, "host": host}))
        start = __import__("time").time() + 1.0
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(lock), str(start)], stdout=subprocess.PIPE, text=True)
            for _ in range(6)
        ]
        answers = [p.communicate(timeout=60)[0].strip() for p in procs]
        assert sorted(answers) == ["False"] * 5 + ["True"], answers


@pytest.mark.parametrize("cut", ["line", "mid-line"])
def test_truncated_samples_file_is_named_refused_and_recomputed(finished, tmp_path, tiny_model_dir, cut):
    config, layout = copy(finished, tmp_path, tiny_model_dir)
    variant = Variant(ABILITY, K, "top")
    samples = layout.samples_file(variant, ABILITY)
    full = samples.read_text()
    lines = full.splitlines(keepends=True)
    samples.write_text("".join(lines[: len(lines) // 2]) + ("" if cut == "line" else lines[-1][:7]))

    what = f"{variant.label()} {ABILITY}"
    assert state(config, "eval", what) == ("stale", f"damaged {samples.name} (not the file its manifest recorded)")
    profile = load_scores(load_config(config), progress=False)
    assert profile.row(ABILITY, ABILITY, K, "top") is None  # not computed from half the items
    assert any(m.variant == variant.label() and "damaged" in m.reason for m in profile.missing)

    evaluate(load_config(config))  # the skip check does not trust it: the job runs again
    assert samples.read_text() == full
    assert state(config, "eval", what)[0] == "done"


def test_truncated_importance_file_is_recomputed(finished, tmp_path, tiny_model_dir):
    config, layout = copy(finished, tmp_path, tiny_model_dir)
    importance = layout.importance_file(ABILITY)
    full = importance.read_bytes()
    importance.write_bytes(full[: len(full) // 2])
    assert state(config, "importance", ABILITY)[0] == "stale"
    finetune(load_config(config))
    assert importance.read_bytes() == full


def hold_lock(folder, seconds: float):
    """Another process that holds the folder's lock for a while."""
    import subprocess
    import sys

    code = (
        "import sys, time; from benchprof.core.locks import folder_lock\n"
        f"with folder_lock({str(folder)!r}, 'benchprof run'):\n"
        "    print('held', flush=True); time.sleep(float(sys.argv[1]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_write_csv_cells_by_hand(tmp_path):
    path = tmp_path / "table.csv"
    rows = [
        {"k": 1e-05, "x": 1 / 3, "flag": True, "note": 'a,"b"', "n": None},
        {"k": 0.5, "x": float("nan"), "flag": False, "note": "", "n": 3},
    ]
    write_csv(path, ("k", "x", "flag", "note", "n"), rows)
    assert path.read_text() == 'k,x,flag,note,n\n0.00001,0.3333333333333333,true,"a,""b""",\n0.5,,false,,3\n'
    assert path.stat().st_mode & 0o777 == shared_mode()
    write_csv(path, ("x", "n"), [{"x": 1 / 3, "n": 7}], digits=3)  # digits round floats only
    assert path.read_text() == "x,n\n0.333,7\n"


def test_lock_names_its_holder_and_a_dead_holders_lock_is_taken_over(tmp_path):
    import signal

    from benchprof import BenchprofError
    from benchprof.core.locks import folder_lock

    proc = hold_lock(tmp_path, 60)
    try:
        with pytest.raises(BenchprofError, match=rf"^{tmp_path}: in use by pid {proc.pid} on .*\(benchprof run, since"):
            with folder_lock(tmp_path, "benchprof extract"):
                pass
    finally:
        proc.send_signal(signal.SIGKILL)  # killed: its lock file stays behind
        proc.wait()
    assert (tmp_path / ".lock").exists()
    with folder_lock(tmp_path, "benchprof extract"):
        with folder_lock(tmp_path, "benchprof finetune"):  # re-entrant: run calls every stage
            pass
        assert (tmp_path / ".lock").exists()
    assert not (tmp_path / ".lock").exists()


def test_two_concurrent_runs_do_the_work_once(tiny_model_dir, tmp_path):
    import subprocess
    import sys
    import time

    config = write_config(tmp_path, tiny_model_dir)
    command = [sys.executable, "-m", "benchprof", "run", str(config)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / "outputs" / "tiny" / ".lock"
    deadline = time.time() + 60
    while not lock.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.run(command, capture_output=True, text=True)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"benchprof: error: {tmp_path / 'outputs' / 'tiny'}: in use by pid {first.pid} on "
        + second.stderr.split(" on ", 1)[1].split(" ", 1)[0]
        + " (benchprof run, since "
        + second.stderr.split("since ", 1)[1].split(")", 1)[0]
        + "); wait for it to finish or stop it, then rerun"
    ]
    assert "run: all stages done" in out and not lock.exists()


def test_a_corrupt_lock_file_is_taken_over(tmp_path):
    from benchprof.core.locks import folder_lock

    (tmp_path / ".lock").write_text("garbage{")  # e.g. a disk that filled while the lock was written
    with folder_lock(tmp_path, "benchprof run"):
        assert '"pid"' in (tmp_path / ".lock").read_text()
    assert not (tmp_path / ".lock").exists()


def test_a_lock_whose_pid_now_belongs_to_another_process_is_taken_over(tmp_path):
    """The holder was killed and its pid later given to an unrelated live process: a live pid in the record
    does not keep every later command out, since what holds a lock is the killed process's flock."""
    import json
    import os
    import signal

    from benchprof.core.locks import folder_lock

    proc = hold_lock(tmp_path, 60)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lock = tmp_path / ".lock"
    holder = json.loads(lock.read_text())
    lock.write_text(json.dumps({**holder, "pid": os.getppid()}))  # the pid now names a live process
    with folder_lock(tmp_path, "benchprof extract"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """A file where the outputs folder should be, or a disk that fills while the lock is written: one
    BenchprofError line naming the path (tracebacks of 49-70 lines before), and no folder or lock left behind."""
    import errno
    import json
    import os

    from benchprof import BenchprofError
    from benchprof.core.locks import folder_lock
    from benchprof.core.storage import write_text

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    model_dir = blocker / "outputs" / "tiny"
    with pytest.raises(BenchprofError) as err:
        with folder_lock(model_dir, "benchprof run"):
            pass
    assert str(err.value) == (
        f"{model_dir}: cannot write ({blocker} is a file, not a folder); no partial file left; rerun to resume"
    )
    with pytest.raises(BenchprofError, match=rf"^{blocker / 'x.json'}: cannot write \({blocker} is a file"):
        write_text(blocker / "x.json", "{}")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(json, "dump", disk_full)
    fresh = tmp_path / "outputs" / "tiny"
    with pytest.raises(BenchprofError, match=rf"^{fresh / '.lock'}: cannot write \(No space left on device\)"):
        with folder_lock(fresh, "benchprof run"):
            pass
    assert not (tmp_path / "outputs").exists()


def test_an_older_manifests_sampled_record_is_still_judged_as_then(tmp_path):
    """Manifests written before full hashes recorded files over 64 MiB by 64 sampled blocks: after the upgrade
    they must not read as damaged (the importance pass and checkpoints would be redone), and a truncated or
    block-edited file still fails them."""
    from benchprof.core.storage import sampled_hash

    path = tmp_path / "importance.safetensors"
    path.write_bytes(bytes(range(256)) * (65 * 2**20 // 256))
    old = {"size": path.stat().st_size, "sampled_hash": sampled_hash(path)}
    assert matches_record(path, old)
    same_size_edit(path, 0)  # the first block is always sampled
    assert not matches_record(path, old)


def test_a_touched_file_is_hashed_once_then_trusted_by_its_new_stat(tmp_path, monkeypatch):
    """A file whose stat key moved but whose bytes did not (touch, chmod, a copy) was hashed in full on every
    check, forever: for an 8 B model's checkpoint, every run. The stage that finds it intact records its new key."""
    import os
    import time

    from benchprof.core import storage
    from benchprof.core.layout import Output
    from benchprof.core.storage import is_current, judge, read_json, write_manifest

    folder = tmp_path / "out"
    folder.mkdir()
    data = folder / "weights.bin"
    data.write_bytes(os.urandom(1 << 16))
    write_manifest(folder, {"x": 1})
    output = Output("masks", "x", folder / "manifest.json", (data,))
    later = time.time() - 10  # settled: its ctime is read as the touch's, so wait past the racy-clean window
    os.utime(data, (later, later))
    time.sleep(2.1)
    hashed = []
    real_hash = storage.file_hash
    monkeypatch.setattr(storage, "file_hash", lambda path, *a: hashed.append(path) or real_hash(path, *a))
    assert judge(output, {"x": 1})[0] == "done" and hashed == [data]  # status: hashed, nothing written
    assert read_json(folder / "manifest.json")["files"]["weights.bin"]["stat"] != storage.stat_key(data)
    assert is_current(output, {"x": 1}) and len(hashed) == 2  # a stage: hashed once more, key recorded
    assert read_json(folder / "manifest.json")["files"]["weights.bin"]["stat"] == storage.stat_key(data)
    assert is_current(output, {"x": 1}) and len(hashed) == 2  # trusted by its new key
    with open(data, "r+b") as f:  # a same-size edit afterwards is still seen
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    assert not is_current(output, {"x": 1})


def test_an_older_sampled_record_becomes_a_full_one_at_the_first_stage_check(tmp_path):
    """A legacy record (64 sampled blocks) is checked by sampling once; the stage that finds it matching records
    the full hash, so a later same-size edit *between* the sampled blocks, which sampling cannot see, is seen."""
    from benchprof.core.layout import Output
    from benchprof.core.storage import is_current, judge, read_json, sampled_hash, write_json, write_manifest

    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "importance.safetensors"
    path.write_bytes(bytes(range(256)) * (65 * 2**20 // 256))
    manifest = write_manifest(folder, {"x": 1})
    manifest["files"][path.name] = {"size": path.stat().st_size, "sampled_hash": sampled_hash(path)}
    write_json(folder / "manifest.json", manifest)
    output = Output("importance", "x", folder / "manifest.json", (path,))
    assert judge(output, {"x": 1})[0] == "done"  # status writes nothing: still the sampled record
    assert "hash" not in read_json(folder / "manifest.json")["files"][path.name]
    assert is_current(output, {"x": 1})  # a stage: matches, and the full hash is recorded
    assert "hash" in read_json(folder / "manifest.json")["files"][path.name]
    between = path.stat().st_size // 126  # half-way between the first two sampled blocks
    old = sampled_hash(path)
    same_size_edit(path, between)
    assert sampled_hash(path) == old  # sampling cannot see this edit ...
    assert not is_current(output, {"x": 1})  # ... the full record does


def test_a_record_cut_short_by_a_size_limit_is_dropped_and_never_glued_to_the_next(tmp_path):
    """append_record under a real file-size limit (RLIMIT_FSIZE, in a child process): the append that crosses it
    fails in one line and leaves half a line; the next append ends that line first, and read_records returns the
    whole records only. A `{}` line, a line edited by hand and text that is no JSON are dropped as well."""
    import json
    import subprocess
    import sys
    import textwrap

    from benchprof.core.storage import RECORD_CHECK, append_record, read_records

    log = tmp_path / "evaluations.jsonl"
    append_record(log, {"region": "first", "acc_norm": [0.25, 1.0]})
    child = textwrap.dedent(f"""
        import resource
        from benchprof import BenchprofError
        from benchprof.core.storage import append_record
        resource.setrlimit(resource.RLIMIT_FSIZE, ({log.stat().st_size + 40}, resource.RLIM_INFINITY))
        try:
            append_record({str(log)!r}, {{"region": "cut", "acc_norm": [0.5] * 100}})
        except BenchprofError as err:
            print(err)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith(f"{log}: cannot append (File too large)")
    assert not log.read_bytes().endswith(b"\n")  # half a line was written
    append_record(log, {"region": "next", "acc_norm": [0.0]})
    assert [r["region"] for r in read_records(log)] == ["first", "next"]
    edited = json.loads(log.read_text().splitlines()[0])
    edited["acc_norm"] = [1.0, 1.0]
    with open(log, "a") as f:
        f.write("{}\n" + json.dumps(edited) + "\nnot json\n")
    assert [r["region"] for r in read_records(log)] == ["first", "next"]
    assert all(RECORD_CHECK not in r for r in read_records(log))


def test_no_lock_log_or_record_is_written_through_a_link(tmp_path):
    """A link where benchprof writes a lock, a stage's log or an append-only record is refused in one line: the file
    outside keeps its bytes, the link stays (it is not deleted either)."""
    from benchprof import BenchprofError
    from benchprof.core.console import quiet
    from benchprof.core.locks import folder_lock
    from benchprof.core.storage import append_record

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    model_dir = tmp_path / "outputs" / "tiny"
    (model_dir / "logs").mkdir(parents=True)
    for link in (model_dir / ".lock", model_dir / "logs" / "frontier.log", model_dir / "evaluations.jsonl"):
        link.symlink_to(outside)
        with pytest.raises(BenchprofError, match=rf"^{link}: a link; benchprof writes no file through a link"):
            if link.name == ".lock":
                with folder_lock(model_dir, "benchprof aggregate"):
                    pass
            elif link.suffix == ".log":
                with quiet("frontier", [link]):
                    print("never written")
            else:
                append_record(link, {"region": "x"})
        assert link.is_symlink() and outside.read_text() == "keep me\n"
        link.unlink()


def test_the_temp_cleanup_removes_only_names_benchprof_wrote(tmp_path):
    """A stage folder holding a user's files named like temporaries (".X.Y.tmp", ".notes.draft.tmp") and what a
    killed atomic write left (a temporary named as atomic_path names it): clear_manifest removes the leftover, and
    only it; remove_temps for one name removes only that name's."""
    from benchprof.core.storage import TEMP_SUFFIX, atomic_path, clear_manifest, remove_temps

    folder = tmp_path / "stage"
    folder.mkdir()
    users = [folder / ".X.Y.tmp", folder / ".notes.draft.tmp", folder / ".ais.csv.mine.tmp"]
    for path in users:
        path.write_text("the user's\n")
    with atomic_path(folder / "ais.csv") as tmp:  # a write killed here leaves its temporary behind
        tmp.write_text("half")
        os.link(tmp, folder / "kept")
    leftover = folder / tmp.name
    os.replace(folder / "kept", leftover)
    assert leftover.name.startswith(".ais.csv.") and leftover.name.endswith(TEMP_SUFFIX)
    other = folder / f".other.json.abc{TEMP_SUFFIX}"
    other.write_text("")
    remove_temps(folder, "ais.csv")
    assert not leftover.exists() and other.exists() and all(p.read_text() == "the user's\n" for p in users)
    clear_manifest(folder)
    assert not other.exists() and all(p.read_text() == "the user's\n" for p in users)


def test_an_edited_or_truncated_profile_file_is_not_done_and_is_written_again(finished, tmp_path, tiny_model_dir):
    """The profile's manifest records each file's size and sha256: ais.csv with one byte changed (its mtime put
    back) or cut to 100 bytes is stale in `status` (which `run --dry_run` prints) naming the file, and aggregate
    writes it again, byte for byte."""
    from benchprof.stages.aggregate import aggregate

    config, layout = copy(finished, tmp_path, tiny_model_dir)
    ais = layout.profile_dir / "ais.csv"
    whole = ais.read_bytes()
    assert state(config, "profile", "ais") == ("done", "")
    damaged = ("stale", "damaged ais.csv (not the file its manifest recorded)")
    same_size_edit(ais, whole.index(b"\n") + 3)
    assert state(config, "profile", "ais") == damaged
    aggregate(load_config(config), plots=False)
    assert ais.read_bytes() == whole and state(config, "profile", "ais") == ("done", "")
    ais.write_bytes(whole[:100])
    assert state(config, "profile", "ais") == damaged


def test_another_configs_evaluations_in_the_same_folder_leave_the_profile_current(finished, tmp_path, tiny_model_dir):
    """A second config sharing the output folder and the model's tag evaluates another benchmark there: the first
    config's profile, computed from its own evaluations, is still done (it was "stale (1 evaluation(s) newer)")."""
    from benchprof.stages.data import data

    config, layout = copy(finished, tmp_path, tiny_model_dir)
    other = write_config(
        tmp_path / "other", tiny_model_dir, settings__output_dir=str(tmp_path / "outputs"), data__dir="data",
        datasets=[{"name": "Temporal_Reasoning"}], evals__benchmarks=["Temporal_Reasoning"],
    )  # fmt: skip
    data(load_config(other))
    evaluate(load_config(other), original_only=True)
    assert (layout.model_dir / "original" / "eval" / "Temporal_Reasoning.json").is_file()
    assert state(config, "profile", "ais") == ("done", "")
