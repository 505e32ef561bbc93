"""The live-loop scenario measured: ``ark-trainer demo --task loop``, its report kept with the machine.

Runs the demo into OUT (or, with ``--from OUT``, takes a run already made by that command) and writes
``bench/results/loop_scenario.md`` (the demo's ``loop_report.md`` under the machine's description) and
``.json`` (the demo's ``loop_report.json`` numbers).

    python bench/loop_scenario.py OUT [demo flags ...]      # e.g. --rounds 3 --poison_share 0.5
    python bench/loop_scenario.py --from OUT [--note TEXT]  # a run made by `ark-trainer demo --task loop`
    --name NAME (before the others): write ``bench/results/NAME.{md,json}`` instead (e.g. a real model's run:
    ``loop_scenario_smollm2``)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import src_env, write_results  # noqa: E402


def main(argv: list[str]) -> int:
    note, name = "", "loop_scenario"
    if argv[:1] == ["--name"] and len(argv) > 1:
        name, argv = argv[1], argv[2:]
    if "--note" in argv:  # how the run went, for a run made before (e.g. what else the machine ran)
        i = argv.index("--note")
        note, argv = argv[i + 1], argv[:i] + argv[i + 2 :]
    if argv[:1] == ["--from"] and len(argv) == 2:
        out, command = Path(argv[1]), "ark-trainer demo --task loop --output_dir OUT (run before)"
    elif argv and not argv[0].startswith("-"):
        out, flags = Path(argv[0]), argv[1:]
        demo = [
            sys.executable,
            "-m",
            "ark_trainer",
            "demo",
            "--task",
            "loop",
            "--output_dir",
            str(out),
            *flags,
        ]
        if subprocess.run(demo, env=src_env(), check=False).returncode != 0:
            return 1
        command = " ".join(["ark-trainer", *demo[3:]])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    figures = json.loads((out / "loop_report.json").read_text(encoding="utf-8"))
    report = (out / "loop_report.md").read_text(encoding="utf-8").splitlines()
    lines = ["# The live loop demo, measured", "", f"Demo command: `{command}`", "", *([note, ""] if note else []),
             *report[2:]]  # fmt: skip
    write_results(name, lines, {"demo_command": command, "note": note, **figures}, quick=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
