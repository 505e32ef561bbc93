"""``ark-trainer export`` (``app/commands/export.py``) writes a GGUF file and a Modelfile only where it may: never
over a user's file, never in a system folder, never into a folder it did not make.

It once wrote ``-o notes.md`` over the user's notes with GGUF bytes (and a Modelfile beside it), wrote
``-o /etc/x.gguf`` and ``/etc/Modelfile``, and gave an ``IsADirectoryError`` traceback for ``-o FOLDER``.
Each of these is now one line, with nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ark_trainer.cli import main
from tests.commands.refusals import refused
from tests.model_files import save_tiny


def test_a_file_of_another_kind_is_never_overwritten(model, tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("# mine\n", encoding="utf-8")
    assert refused(capsys, ["export", str(model), "-o", str(notes)]) == [
        f"error: -o: {str(notes)!r}: give a file name ending in .gguf"
    ]
    fake = tmp_path / "mine.gguf"
    fake.write_text("not a model\n", encoding="utf-8")
    assert refused(capsys, ["export", str(model), "-o", str(fake)]) == [
        f"error: -o: {str(fake)!r} exists and is not a GGUF file; it is not overwritten: give a new file name"
    ]
    assert (
        notes.read_text(encoding="utf-8") == "# mine\n"
        and fake.read_text(encoding="utf-8") == "not a model\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.gguf", "notes.md"]


def test_a_modelfile_of_the_users_own_is_never_overwritten(model, tmp_path, capsys):
    (tmp_path / "Modelfile").write_text("FROM llama3\nSYSTEM mine\n", encoding="utf-8")
    lines = refused(capsys, ["export", str(model), "-o", str(tmp_path / "m.gguf")])
    assert lines == [
        f"error: -o: {tmp_path / 'Modelfile'} is not a Modelfile ark-trainer wrote; it is not overwritten: "
        "give -o a file in another folder"
    ]
    assert (tmp_path / "Modelfile").read_text(encoding="utf-8") == "FROM llama3\nSYSTEM mine\n"
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.parametrize("where", ["/etc/x.gguf", "/usr/lib/x.gguf", "/x.gguf"])
def test_a_system_folder_is_refused(model, capsys, where):
    lines = refused(capsys, ["export", str(model), "-o", where])
    assert "is a system folder" in lines[0], lines
    assert not Path(where).exists()


def test_a_folder_as_the_file_is_one_line(model, tmp_path, capsys):
    assert refused(capsys, ["export", str(model), "-o", str(tmp_path)]) == [
        f"error: -o: {str(tmp_path)!r} is a folder; give a file path, e.g. {str(tmp_path / 'model.gguf')!r}"
    ]


def test_the_default_folder_beside_a_model_is_ours_or_left_alone(model, tmp_path, capsys):
    import shutil

    hf = shutil.copytree(model, tmp_path / "hf")
    beside = tmp_path / "hf-gguf"
    beside.mkdir()
    (beside / "notes.txt").write_text("mine", encoding="utf-8")
    lines = refused(capsys, ["export", str(hf)])
    assert lines == [
        f"error: export: {beside} holds notes.txt, not only an export of ours; give -o FILE.gguf elsewhere"
    ]
    assert sorted(p.name for p in beside.iterdir()) == ["notes.txt"]


def test_a_folder_that_is_not_a_run_of_ours_gets_no_export_folder(model, tmp_path, capsys):
    import shutil

    project = tmp_path / "project"
    shutil.copytree(model, project / "model")
    (project / "report.md").write_text("# mine\n", encoding="utf-8")
    lines = refused(capsys, ["export", str(project)])
    assert lines == [
        f"error: export: {project} is not a run folder of ark-trainer, so export/ is not written into it; "
        f"give its model folder ({project / 'model'}) or -o FILE.gguf"
    ]
    assert not (project / "export").exists()


def _run_from_gguf(model: Path, tmp_path: Path, source: Path, where: str) -> Path:
    """A run of ours whose base model was the GGUF ``source``, named in run.yaml or in ark_source.json."""
    import shutil

    from ark_trainer.base.fileio import write_json
    from ark_trainer.core.folders import claim_folder

    run = claim_folder(tmp_path / "run")
    shutil.copytree(model, run / "model")
    named = str(source) if where == "run.yaml" else "elsewhere.gguf"
    (run / "run.yaml").write_text(f"model_path: {named}\n", encoding="utf-8")
    if where == "ark_source.json":
        write_json(run / "base_model" / "ark_source.json", {"file": str(source)})
    return run


@pytest.mark.parametrize("where", ["run.yaml", "ark_source.json"])
@pytest.mark.parametrize("spelling", ["same path", "through a link"])
def test_the_runs_own_source_gguf_is_never_overwritten(model, tmp_path, capsys, where, spelling):
    source = tmp_path / "base.Q4_1.gguf"
    source.write_bytes(b"GGUF" + b"\1" * 60)
    run = _run_from_gguf(model, tmp_path, source, where)
    dest = source
    if spelling == "through a link":
        dest = tmp_path / "link.gguf"
        dest.symlink_to(source)
    [line] = refused(capsys, ["export", str(run), "-o", str(dest)])
    assert "is the GGUF this run was trained from" in line and "not overwritten" in line, line
    assert source.read_bytes() == b"GGUF" + b"\1" * 60


def test_a_fifo_as_the_file_or_the_modelfile_is_refused_without_waiting(model, tmp_path, capsys):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    [line] = refused(capsys, ["export", str(model), "-o", str(fifo)])
    assert "exists and is not a GGUF file" in line, line
    beside = tmp_path / "other"
    beside.mkdir()
    os.mkfifo(beside / "Modelfile")
    [line] = refused(capsys, ["export", str(model), "-o", str(beside / "m.gguf")])
    assert "is not a Modelfile ark-trainer wrote" in line, line
    assert sorted(p.name for p in beside.iterdir()) == ["Modelfile"]


@pytest.mark.parametrize("fails", ["tensors", "modelfile"])
def test_a_full_disk_is_one_line_and_leaves_no_partial_file(model, tmp_path, capsys, monkeypatch, fails):
    import errno

    import gguf

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / ".m.gguf.partial"))

    if fails == "tensors":
        monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full)
    else:
        import ark_trainer.base.fileio

        monkeypatch.setattr(ark_trainer.base.fileio, "atomic_write_text", full)
    (tmp_path / "out").mkdir()
    [line] = refused(capsys, ["export", str(model), "-o", str(tmp_path / "out" / "m.gguf")])
    assert "No space left on device" in line and "free disk space" in line, line
    assert not any(p.name.endswith(".partial") for p in (tmp_path / "out").iterdir())


@pytest.mark.parametrize("fails", ["modelfile", "record"])
def test_a_full_disk_after_the_gguf_leaves_the_previous_export_as_it_was(
    tmp_path, capsys, monkeypatch, fails
):
    """The GGUF was once put in place before the Modelfile was written: a full disk then left the new GGUF
    with the old Modelfile, under a message saying nothing partial was left. Now all or none is replaced."""
    import errno
    import shutil

    import ark_trainer.base.fileio
    from ark_trainer.core.folders import claim_folder

    run = claim_folder(tmp_path / "run")  # a run: export.json is one of its outputs too
    save_tiny(run / "model", "qwen2")
    assert main(["export", str(run)]) == 0
    export = run / "export"
    before = {p.name: p.read_bytes() for p in export.iterdir()}
    assert sorted(before) == ["Modelfile", "export.json", "model-f16.gguf"]
    shutil.rmtree(run / "model")
    save_tiny(run / "model", "llama")  # another model: its export would differ in every file
    real = ark_trainer.base.fileio.atomic_write_text
    target = "Modelfile" if fails == "modelfile" else "export.json"

    def full(path, *args, **kwargs):
        if target in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ark_trainer.base.fileio, "atomic_write_text", full)
    capsys.readouterr()
    [line] = refused(capsys, ["export", str(run)])
    assert "No space left on device" in line and "the previous export, if any, is unchanged" in line, line
    assert {p.name: p.read_bytes() for p in export.iterdir()} == before
