"""``ark-trainer export OUT --format gguf [--quant f16|q8_0] [-o FILE]``: the trained model as one GGUF file.

Writes ``OUT/model`` (a LoRA adapter saved with ``--save_adapter_only`` is merged into its base first) as
``OUT/export/model-<quant>.gguf`` (or ``-o FILE``) with its tokenizer and chat template, an Ollama
``Modelfile`` beside it, and ``OUT/export/export.json`` (what was written: file, size, sha256, seconds),
which the report shows. Serve it with::

    cd OUT/export && ollama create NAME -f Modelfile && ollama run NAME
    llama-server -m OUT/export/model-f16.gguf --port 8080

``OUT`` may also be a Hugging Face model folder itself (config.json + safetensors); its export goes into a
new folder beside it (``NAME-gguf/``). Where it writes is checked before anything is converted
(:func:`check_destination`): ``OUT/export/`` only in a run (or loop) of ours, ``-o`` a ``.gguf`` name that is
new or a GGUF file already (never the GGUF the run was trained from), outside system folders, and a
``Modelfile`` only where none of the user's is. A write that fails (a full disk) is one line, and leaves no
partial file: every output is written in full first and only then put in place, all together, so the
previous export stays as it was.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, opt
from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json
from ark_trainer.core.runfolder import EXPORT_RECORD, RunFolder

FORMATS = ("gguf",)


@dataclass
class ExportOptions:
    out: str = opt(
        None, "a run's --output_dir (holds model/), or a Hugging Face model folder", positional=True
    )
    format: str = opt("gguf", "file format (default: gguf)", choices=list(FORMATS))
    quant: str = opt("f16", "f16 (same answers as the trained model) or q8_0 (about half the size)",
                     choices=["f16", "q8_0"])  # fmt: skip
    output: str | None = opt(
        None, "the GGUF file to write (default: OUT/export/model-QUANT.gguf)", aliases=("-o",)
    )


def register(sub) -> None:
    add_command(
        sub,
        "export",
        ExportOptions,
        _cmd_export,
        help="write OUT/model as a GGUF file plus an Ollama Modelfile (for Ollama and llama.cpp)",
        description="Write the trained model (merged if LoRA) as one GGUF file with its tokenizer and chat "
        "template, and an Ollama Modelfile beside it. Serve it with `ollama create NAME -f Modelfile` or "
        "llama.cpp's `llama-server -m FILE`.",
    )


def model_folder(out: Path) -> Path:
    """The model of a run folder (``OUT/model``), or ``out`` itself when it is a model folder."""
    for folder in (RunFolder(out).model_dir, out):
        if (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file():
            return folder
    raise UserError(
        f"export: {out} holds no model (model/config.json); give the --output_dir of a finished train run "
        "or a Hugging Face model folder"
    )


@contextmanager
def merged(folder: Path):
    """``folder`` as a full model: an adapter-only folder is merged into its base in a temp folder."""
    if not (folder / "adapter_config.json").is_file() or (folder / "config.json").is_file():
        yield folder
        return
    from ark_trainer.core.export import merge_adapter

    tmp = Path(tempfile.mkdtemp(prefix="ark-export-"))
    try:
        merge_adapter(folder, tmp / "merged")
        for name in (
            "tokenizer.json",
            "tokenizer_config.json",
            "chat_template.jinja",
            "special_tokens_map.json",
        ):
            if (folder / name).is_file():
                shutil.copy(folder / name, tmp / "merged" / name)
        yield tmp / "merged"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def source_hints(out: Path) -> tuple[str | None, str | None]:
    """(tokenizer.ggml.pre, Ollama template) of the run's base model, when it came from a GGUF or Ollama."""
    record = RunFolder(out).base_model_dir / "ark_source.json"
    try:
        data = read_json(record) if record.is_file() else {}
    except (OSError, ValueError):
        data = {}
    return data.get("pre_tokenizer"), data.get("ollama_template")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


OURS_IN_EXPORT = re.compile(r"model-[\w.]+\.gguf|Modelfile|export\.json|\..*\.partial")


def _our_modelfile(path: Path) -> bool:
    from ark_trainer.core.export.gguf import MODELFILE_HEAD

    if not path.is_file():  # a FIFO would block the open
        return False
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.readline(200).startswith(MODELFILE_HEAD)  # the first line of every Modelfile we write
    except (OSError, UnicodeDecodeError):
        return False


def check_destination(out: Path, dest: Path | None, quant: str) -> Path:
    """The GGUF file to write (``dest``, else the default), refused in one line where it would touch a file
    or folder that is not ours; writes nothing."""
    from ark_trainer.core.folders import owned, system_problem
    from ark_trainer.core.models.gguf import is_gguf_file

    folder = model_folder(out)
    if dest is None and folder != out and not (owned(out, "run") or owned(out, "loop")):
        raise UserError(
            f"export: {out} is not a run folder of ark-trainer, so export/ is not written into it; give its model "
            f"folder ({folder}) or -o FILE.gguf"
        )
    flag = "-o" if dest is not None else "export"
    if dest is None:
        where = RunFolder(out).export_dir if folder != out else out.parent / f"{out.name}-gguf"
        others = (
            sorted(p.name for p in where.iterdir() if not OURS_IN_EXPORT.fullmatch(p.name))
            if where.is_dir()
            else []
        )
        if others and folder == out:
            raise UserError(
                f"export: {where} holds {', '.join(others[:5])}, not only an export of ours; give -o FILE.gguf elsewhere"
            )
        dest = where / f"model-{quant}.gguf"
    problem = system_problem(dest.parent, flag)
    if problem:
        raise UserError(problem.replace(repr(str(dest.parent)), repr(str(dest)), 1))
    if dest.is_dir():
        raise UserError(
            f"{flag}: {str(dest)!r} is a folder; give a file path, e.g. {str(dest / 'model.gguf')!r}"
        )
    if dest.suffix.lower() != ".gguf":
        raise UserError(f"{flag}: {str(dest)!r}: give a file name ending in .gguf")
    if dest.exists() and not is_gguf_file(dest):
        raise UserError(
            f"{flag}: {str(dest)!r} exists and is not a GGUF file; it is not overwritten: give a new file name"
        )
    if folder != out and (source := _run_source(out, dest)):
        raise UserError(
            f"{flag}: {str(dest)!r} is the GGUF this run was trained from ({source}); it is not overwritten: "
            "give a new file name"
        )
    beside = dest.parent / "Modelfile"
    if beside.exists() and not _our_modelfile(beside):
        raise UserError(
            f"{flag}: {beside} is not a Modelfile ark-trainer wrote; it is not overwritten: give -o a file in "
            "another folder"
        )
    return dest


def _run_source(out: Path, dest: Path) -> str | None:
    """Where the run's own base model file is named, when ``dest`` is that file (run.yaml, ark_source.json)."""
    run = RunFolder(out)
    try:
        record = read_json(run.base_model_dir / "ark_source.json")
    except (OSError, ValueError, RecursionError):
        record = {}
    named = {
        "run.yaml model_path": run.config().get("model_path"),
        "base_model/ark_source.json file": record.get("file") if isinstance(record, dict) else None,
    }
    for where, source in named.items():
        try:
            if isinstance(source, str) and dest.exists() and Path(source).exists() and dest.samefile(source):
                return where
        except OSError:
            continue
    return None


def export_run(out: Path, quant: str = "f16", dest: Path | None = None) -> dict:
    """Export ``out``'s model as GGUF plus Modelfile; returns the record also written to export.json.

    Every output (the GGUF, the Modelfile, a run's export.json) is written in full beside its destination
    first (:func:`~ark_trainer.base.fileio.staged_path`); only then are they put in place together
    (:func:`~ark_trainer.base.fileio.replace_together`), so a write that fails (a full disk at any of them)
    leaves the previous export as it was and no partial file."""
    from ark_trainer.base.fileio import replace_together, staged_path

    out = Path(out)
    folder = model_folder(out)
    run = folder != out
    dest = check_destination(out, Path(dest) if dest else None, quant)
    outputs = [dest, dest.parent / "Modelfile"] + ([RunFolder(out).export_dir / EXPORT_RECORD] if run else [])
    try:
        record = _write_staged(out, folder, dest, quant, run)
        replace_together(outputs)
    except BaseException:
        for path in outputs:
            staged_path(path).unlink(missing_ok=True)
        raise
    return record


def _write_staged(out: Path, folder: Path, dest: Path, quant: str, run: bool) -> dict:
    """The export's files, each written to its :func:`~ark_trainer.base.fileio.staged_path`; returns the record."""
    from ark_trainer.base.fileio import atomic_write_text, staged_path, write_json
    from ark_trainer.core.export.gguf import export_gguf, modelfile

    pre, template = source_hints(out) if run else (None, None)
    start = time.monotonic()
    with merged(folder) as full:
        exported = export_gguf(full, staged_path(dest), quant, pre_tokenizer=pre, name=out.name)
    atomic_write_text(staged_path(dest.parent / "Modelfile"), modelfile(dest.name, exported, template))
    record = {
        "file": str(dest.resolve()),
        "format": "gguf",
        "quant": quant,
        "architecture": exported.architecture,
        "size_bytes": exported.size,
        "sha256": _sha256(staged_path(dest)),
        "tensors": exported.tensors,
        "pre_tokenizer": exported.pre_tokenizer,
        "modelfile": str((dest.parent / "Modelfile").resolve()),
        "seconds": round(time.monotonic() - start, 1),
    }
    if run:
        run_folder = RunFolder(out)
        kept = [r for r in run_folder.exports() if r["file"] != record["file"]]
        write_json(staged_path(run_folder.export_dir / EXPORT_RECORD), [*kept, record])
    return record


def _cmd_export(args: ExportOptions) -> int:
    try:
        record = export_run(Path(args.out), args.quant, Path(args.output) if args.output else None)
    except OSError as exc:  # a full disk, a folder made read-only meanwhile: the partial file is removed
        where = f" {exc.filename}" if exc.filename else ""
        raise UserError(
            f"export: cannot write{where} ({exc.strerror or exc}); free disk space or give -o FILE.gguf "
            "on another disk (the previous export, if any, is unchanged; no partial file is left)"
        ) from None
    file, modelfile = Path(record["file"]), Path(record["modelfile"])
    print(
        f"export: {file} ({record['architecture']}, {record['quant']}, {record['size_bytes'] / 1e6:.1f} MB, "
        f"{record['tensors']} tensors) in {record['seconds']} s"
    )
    print(
        f"serve with Ollama:    cd {modelfile.parent} && ollama create NAME -f {modelfile.name} && ollama run NAME"
    )
    print(
        f"serve with llama.cpp: llama-server -m {file} --port 8080   (OpenAI API at http://127.0.0.1:8080/v1)"
    )
    return 0
