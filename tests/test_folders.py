"""Which folders a command may write into (``core/folders.py``): never a folder of the user's other files.

Every command that writes one (``train``, ``demo``, ``rm train``, ``loop``, ``run``'s collection, ``data
collect -o``, ``score --output_file``) refuses a non-empty folder that holds no ark-trainer folder of its
kind, ``/``, the home folder and system folders, in one line, before anything is written; the user's files
stay byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.cli import main
from ark_trainer.core.folders import MARKER, check_folder, check_output_file, claim_folder, owned
from tests.conftest import refused
from tests.tiny_runs import base


def project(root: Path) -> dict[str, bytes]:
    """A user's project folder: its own data/train.jsonl, report.md and logs/ (no run of ours)."""
    files = {
        "data/train.jsonl": b'{"prompt": "mine"}\n',
        "report.md": b"# my own report\n",
        "logs/app.log": b"my log\n",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def train_argv(a: dict, out: Path | str, *extra: str) -> list[str]:
    return [
        "train", "--model_path", str(a["model"]), "--data_path", str(a["train"]), "--output_dir", str(out),
        "--max_train_steps", "2", "--device", "cpu", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("overwrite", ["False", "True"])
def test_train_refuses_a_project_folder_and_leaves_it_untouched(assets, tmp_path, capsys, overwrite):
    out = tmp_path / "proj"
    project(out)
    before = snapshot(out)
    lines = refused(capsys, train_argv(assets, out, "--overwrite_output_dir", overwrite))
    assert len(lines) == 1, lines
    assert "holds data/, logs/, report.md and no ark-trainer run" in lines[0]
    assert "give an empty or new folder" in lines[0]
    assert snapshot(out) == before


def test_a_stray_run_yaml_does_not_make_a_folder_ours(assets, tmp_path, capsys):
    out = tmp_path / "k8s"
    out.mkdir()
    (out / "run.yaml").write_text("apiVersion: v1\nkind: Pod\n", encoding="utf-8")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    before = snapshot(out)
    lines = refused(capsys, train_argv(assets, out, "--overwrite_output_dir", "True"))
    assert len(lines) == 1 and "holds notes.txt, run.yaml and no ark-trainer run" in lines[0]
    assert snapshot(out) == before


@pytest.mark.parametrize(
    "where", ["/", "/etc", "/usr/local/runs/x", "/var/lib/x", "/bin", "~", "HOME", "/tmp"]
)
def test_system_and_home_folders_are_refused(assets, capsys, where):
    path = os.environ["HOME"] if where == "HOME" else where
    lines = refused(capsys, train_argv(assets, path))
    assert len(lines) == 1
    assert "is a system folder" in lines[0] or "is your home folder" in lines[0], lines


def test_log_dir_in_a_system_folder_is_refused(assets, tmp_path, capsys):
    lines = refused(capsys, [*train_argv(assets, tmp_path / "new"), "--log_dir", "/etc/ark"])
    assert lines == [
        "error: --log_dir: '/etc/ark' is a system folder; give a folder of its own, e.g. ./runs/NAME"
    ]
    assert not (tmp_path / "new").exists()


def test_ours_new_empty_and_legacy_folders_are_fine(tmp_path):
    check_folder(tmp_path / "new" / "deeper", "--output_dir")  # does not exist yet
    (tmp_path / "empty").mkdir()
    check_folder(tmp_path / "empty", "--output_dir")
    marked = claim_folder(tmp_path / "marked")
    (marked / "data").mkdir()  # e.g. the demo's data, written before train starts
    assert owned(marked, "run") and json.loads((marked / MARKER).read_text())["kind"] == "run"
    check_folder(marked, "--output_dir")
    old = tmp_path / "old"  # a run of an earlier version: no marker, but run.yaml with plan.json
    old.mkdir()
    (old / "run.yaml").write_text("task_name: x\n")
    (old / "plan.json").write_text("{}")
    check_folder(old, "--output_dir")
    with pytest.raises(UserError, match="holds an ark-trainer run, not a reward model"):
        check_folder(marked, "--output_dir", "reward model")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match="is a file, not a folder"):
        check_folder(tmp_path / "afile", "--output_dir")


def test_an_older_run_of_ours_is_still_a_run(assets, tmp_path, capsys):
    out = tmp_path / "old_run"
    out.mkdir()
    (out / "run.yaml").write_text("task_name: other\nmax_train_steps: 9\n", encoding="utf-8")
    (out / "events.jsonl").write_text("", encoding="utf-8")
    lines = refused(capsys, train_argv(assets, out))  # the run check speaks, not the folder check
    assert lines == [
        f"error: --output_dir: {out} already holds a run (run.yaml); pick a new folder, pass "
        "--overwrite_output_dir True, or --resume True to continue it"
    ]


def test_demo_refuses_a_project_folder(tmp_path, capsys):
    out = tmp_path / "proj"
    project(out)
    before = snapshot(out)
    lines = refused(capsys, ["demo", "--output_dir", str(out), "--overwrite_output_dir", "True"])
    assert len(lines) == 1 and "and no ark-trainer run" in lines[0]
    assert snapshot(out) == before


def test_rm_train_overwrite_never_deletes_a_project_folder(assets, tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps({"prompt": f"q{i}", "chosen": "good", "rejected": "bad"}) + "\n" for i in range(8)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "proj"
    project(out)
    before = snapshot(out)
    argv = [
        "rm",
        "train",
        "--data_path",
        str(pairs),
        "--model_path",
        str(assets["model"]),
        "--output_dir",
        str(out),
    ]
    lines = refused(capsys, [*argv, "--overwrite_output_dir", "True"])
    assert len(lines) == 1 and "and no ark-trainer reward model" in lines[0]
    assert snapshot(out) == before
    lines = refused(capsys, [*argv[:-1], os.environ["HOME"], "--overwrite_output_dir", "True"])
    assert "is your home folder" in lines[0]


def test_loop_refuses_a_project_folder(assets, tmp_path, capsys):
    out = tmp_path / "proj"
    project(out)
    before = snapshot(out)
    lines = refused(capsys, ["loop", "--output_dir", str(out), "--model_path", str(assets["model"])])
    assert len(lines) == 1 and "and no ark-trainer loop" in lines[0]
    assert snapshot(out) == before


def test_a_user_file_named_like_our_lock_or_marker_does_not_make_a_folder_empty(assets, tmp_path, capsys):
    for name, text in ((".lock", "my lock file\n"), (MARKER, '{"by": "someone else"}')):
        out = tmp_path / name.strip(".")
        out.mkdir()
        (out / name).write_text(text, encoding="utf-8")
        lines = refused(capsys, train_argv(assets, out))
        assert len(lines) == 1 and f"holds {name} and no ark-trainer run" in lines[0], lines
        assert (out / name).read_text(encoding="utf-8") == text
    lock = tmp_path / "lock_of_ours"  # our own lock, left by a run killed before it wrote anything
    lock.mkdir()
    (lock / ".lock").write_text('{"pid": 1, "host": "h", "started_at": "t"}\n', encoding="utf-8")
    check_folder(lock, "--output_dir")


@pytest.mark.parametrize("where", ["/var/tmp", "/private/tmp", "/private/var/tmp", "/dev/shm"])
def test_the_shared_temporary_folders_themselves_are_refused(where):
    with pytest.raises(UserError, match="is a system folder"):  # checked alone: nothing could be written
        check_folder(where, "--output_dir")
    if where == "/var/tmp":
        check_folder("/var/tmp/my-own-run", "--output_dir")  # a folder of its own there is fine


def test_another_tools_run_yaml_with_events_or_a_plan_is_not_a_run_of_ours(assets, tmp_path, capsys):
    for other in ("events.jsonl", "plan.json"):
        out = tmp_path / other.split(".")[0]
        out.mkdir()
        (out / "run.yaml").write_text("apiVersion: v1\nkind: Pod\n", encoding="utf-8")
        (out / other).write_text('{"a": 1}\n', encoding="utf-8")
        (out / "report.md").write_text("# my own report\n", encoding="utf-8")
        before = snapshot(out)
        lines = refused(capsys, train_argv(assets, out, "--overwrite_output_dir", "True"))
        assert len(lines) == 1 and "and no ark-trainer run" in lines[0], lines
        assert snapshot(out) == before
        assert refused(capsys, ["report", str(out)]) == [
            f"error: {out}: not a run folder of ark-trainer (no {MARKER}, no run.yaml of a train run); pass "
            "the --output_dir of a train run"
        ]
        assert snapshot(out) == before


def test_data_collect_never_overwrites_another_kind_of_file(tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("# mine\n", encoding="utf-8")
    lines = refused(capsys, ["data", "collect", "--openclaw", "-o", str(notes)])
    assert lines == [
        f"error: -o: {str(notes)!r} exists and is not a JSONL file; it is not overwritten: give a new file name"
    ]
    assert notes.read_text(encoding="utf-8") == "# mine\n"
    assert "a system folder" in refused(capsys, ["data", "collect", "--openclaw", "-o", "/etc/rows.jsonl"])[0]
    assert "is a folder" in refused(capsys, ["data", "collect", "--openclaw", "-o", str(tmp_path)])[0]


def test_score_output_file_never_overwrites_another_kind_of_file(assets, tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("# mine\n", encoding="utf-8")
    argv = ["score", "--data_path", str(assets["train"]), "--output_file", str(notes)]
    assert "exists and is not a JSONL file" in refused(capsys, argv)[0]
    assert notes.read_text(encoding="utf-8") == "# mine\n"
    scores = tmp_path / "scores.jsonl"
    assert main([*argv[:-1], str(scores)]) == 0 and main([*argv[:-1], str(scores)]) == 0  # its own: replaced
    capsys.readouterr()


@pytest.mark.slow
def test_a_run_marks_its_folder_and_may_replace_it_later(assets, tmp_path, capsys):
    out = tmp_path / "run"
    flags = [
        "--strategy",
        "GRPO",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
        "--max_completion_length",
        "4",
    ]
    flags += ["--eval_auto", "False", "--save_steps", "0", "--min_free_disk_gb", "0"]
    assert main([*train_argv(assets, out), *flags]) == 0
    assert json.loads((out / MARKER).read_text())["kind"] == "run" and (out / "model").is_dir()
    assert main([*train_argv(assets, out), *flags, "--overwrite_output_dir", "True"]) == 0  # ours: replaced
    capsys.readouterr()


def test_output_dir_that_is_a_file_is_refused_and_left_alone(assets, tmp_path, capsys):
    target = tmp_path / "out.txt"
    target.write_text("mine")
    lines = refused(capsys, base(assets, target))
    assert any("--output_dir:" in line and "is a file" in line for line in lines)
    assert target.read_text() == "mine"
    lines = refused(capsys, base(assets, target / "run"))
    assert any("--output_dir:" in line and "is a file" in line for line in lines)


def test_output_dir_on_a_read_only_mount_is_refused(assets, tmp_path, capsys):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        lines = refused(capsys, base(assets, mnt / "run"))
        assert any(line.startswith("error: --output_dir: cannot write in") for line in lines), lines
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_an_output_file_may_sit_directly_in_a_shared_folder_but_never_in_a_system_tree(
    assets, tmp_path, capsys
):
    import uuid

    argv = ["score", "--data_path", str(assets["train"]), "--output_file"]
    name = f"ark-scores-{uuid.uuid4().hex}.jsonl"
    for spelling in (f"/tmp/{name}", f"/tmp//{name}", f"/tmp/./{name}", f"/var/tmp/{name}"):
        try:
            assert main([*argv, spelling]) == 0, spelling  # a file in /tmp holds nothing else of the user's
            assert Path(spelling).is_file()
        finally:
            Path(spelling).unlink(missing_ok=True)
    capsys.readouterr()
    link = tmp_path / "into_etc.jsonl"
    link.symlink_to("/etc/ark-scores.jsonl")  # a path of the user's that resolves into a system tree
    for spelling in ("/etc/scores.jsonl", "/usr/lib/../lib/scores.jsonl", "/proc/scores.jsonl", str(link)):
        lines = refused(capsys, [*argv, spelling])
        assert len(lines) == 1 and "a system folder" in lines[0] and spelling in lines[0], lines
    check_output_file(Path.home() / name, "-o")  # the home folder too: a file there is not the folder
