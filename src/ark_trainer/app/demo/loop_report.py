"""The live-loop demo's report: ``OUT/loop_report.md`` and the same numbers in ``OUT/loop_report.json``.

Per round, from the round's own ``train`` run folder (``LOOP/rounds/N``): the served model's and the
candidate's task accuracy on the round's **test** split (the frozen held-out rows that the hash gave to
test; the gate read the dev split), overall, on the new kind and on the other kinds, each with n and a 95% Wilson interval,
and the candidate against the served model paired prompt by prompt (``core/stats.py``: exact McNemar, Newcombe
interval); the gate's decision and reasons; what the round trained on (turns, how many of the new kind,
poisoned targets that reached it) and what the correction filter dropped; the loop's cost line; how many
of the served model's held-out answers came from the answer cache. Then serving (failed requests, turn
latency p50/p95 idle and while a round trains, by route) and the poison check: 0 secrets in any round's
training data, and the poison round refused or not worse on test.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from ark_trainer.app.demo.loop_scenario import CREDENTIAL_REPLY, NEW_KIND, SECRET_PREFIX
from ark_trainer.base.fileio import atomic_write_text, read_json, read_jsonl, write_json
from ark_trainer.core.metrics import OUTCOMES, TASK_ACCURACY
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.stats import binary, wilson
from ark_trainer.data.scrub import Scrubber
from ark_trainer.data.split import mde_points


def rate(outcomes: list[float]) -> dict[str, Any]:
    """``{"value", "k", "n", "low", "high"}`` of 1/0 outcomes, the interval Wilson's (95%)."""
    n, k = len(outcomes), int(sum(outcomes))
    low, high = wilson(k, n)
    return {
        "value": round(k / n, 4) if n else None,
        "k": k,
        "n": n,
        "low": round(low, 4),
        "high": round(high, 4),
    }


def _question(row: dict) -> str:
    messages = row.get("prompt") or row.get("messages") or []
    users = [m for m in messages if m.get("role") == "user"]
    return users[-1]["content"] if users else str(row.get("question", ""))


def _labels(out: Path) -> dict[str, str]:
    """Question → true label of every row the users or the held-out set hold (scrubbed spellings too:
    the recorder scrubs the phone and ID numbers of a question)."""
    found: dict[str, str] = {}
    for name in ("heldout", "pool"):
        for row in read_jsonl(out / "data" / f"{name}.jsonl"):
            found[row["question"]] = found[Scrubber().text(row["question"])] = row["label"]
    return found


def _test_figures(folder: Path, stage: str | None, heldout: set[str], truth: dict[str, str]) -> dict | None:
    run = RunFolder(folder)
    rows = read_jsonl(run.test_rows_file()) if run.test_rows_file().is_file() else []
    base, cand = run.eval("base"), run.eval(stage) if stage else {}
    if not rows or not base.get("answers") or not cand.get("answers"):
        return None
    keep = [i for i, r in enumerate(rows) if _question(r) in heldout]  # the frozen held-out rows only
    new = [i for i in keep if truth.get(_question(rows[i])) == NEW_KIND]
    old = [i for i in keep if i not in set(new)]  # the kinds the starting model was taught: forgotten?

    def outcomes(ev: dict, idx: list[int]) -> list[float]:
        return [float(ev["answers"][i][OUTCOMES][TASK_ACCURACY]) for i in idx]

    out: dict[str, Any] = {}
    for name, idx in (("overall", keep), ("new_kind", new), ("old_kinds", old)):
        before, after = outcomes(base, idx), outcomes(cand, idx)
        out[name] = {"served": rate(before), "candidate": rate(after),
                     "paired": binary(TASK_ACCURACY, before, after).to_json() if idx else None}  # fmt: skip
    dev = run.dev_eval("base")
    out["dev_n"] = dev.get("n")
    out["dev_mde_points"] = round(mde_points(int(dev["n"])), 1) if dev.get("n") else None
    out["served_answers_cached"] = base.get("answers_cached")
    out["served_answers"] = base.get("n")
    return out


def _round_data(folder: Path, truth: dict[str, str]) -> dict[str, Any]:
    """What the round trained on: its new turns (the first ``n_new`` rows of ``data.jsonl``, by its
    ``replay.json``) with how many are of the new kind and corrections, the replayed rows, and the poisoned
    targets and secrets in all of it."""
    rows = read_jsonl(folder / "data.jsonl") if (folder / "data.jsonl").is_file() else []
    mixed = read_json(folder / "replay.json") if (folder / "replay.json").is_file() else {}
    n_new = int(mixed.get("n_new", len(rows)))
    wrong = creds = secrets = new = corrections = 0
    for i, row in enumerate(rows):
        label = truth.get(_question(row))
        new += i < n_new and label == NEW_KIND
        corrections += i < n_new and "reference" in row
        wrong += "label" in row and label is not None and row["label"] != label
        target = row["messages"][-1]["content"] if row["messages"][-1]["role"] == "assistant" else ""
        creds += CREDENTIAL_REPLY in target
        scrubber = Scrubber()
        scrubber.value(row)
        text = json.dumps(row, ensure_ascii=False)
        secrets += sum(scrubber.counts.values()) + text.count(SECRET_PREFIX)
    return {"rows": n_new, "replayed": len(rows) - n_new, "replayed_from": mixed.get("from") or {}, "new_kind": new, "corrected_targets": corrections, "wrong_label_targets": wrong,
            "credential_request_targets": creds, "secrets": secrets}  # fmt: skip


def _cost_lines(out: Path) -> dict[int, str]:
    lines: dict[int, str] = {}
    log = out / "loop.log"
    for line in (log.read_text(encoding="utf-8", errors="replace") if log.is_file() else "").splitlines():
        m = re.match(r"loop: round (\d+): (expected to take .*|its cost is not measured yet.*)$", line)
        if m:
            lines[int(m.group(1))] = m.group(2)
    return lines


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return round(
            (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds(), 1
        )
    except ValueError:
        return None


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def serving_figures(ledger: dict) -> dict[str, Any]:
    """Failed requests and turn latency (p50/p95, seconds) idle and while a round trained, by route."""
    requests = ledger.get("requests") or []
    out: dict[str, Any] = {"requests": len(requests), "failed": sum(not r["ok"] for r in requests),
                           "errors": sorted({r["error"] for r in requests if not r["ok"]})[:5]}  # fmt: skip
    for route in ("http", "openclaw"):
        for when, busy in (("idle", False), ("training", True)):
            times = [
                r["seconds"] for r in requests if r["ok"] and r["route"] == route and r["training"] == busy
            ]
            out[f"{route}_{when}"] = {
                "n": len(times),
                "p50": percentile(times, 0.5),
                "p95": percentile(times, 0.95),
            }
    sessions = ledger.get("sessions") or []
    out["sessions"] = len(sessions)
    out["openclaw_sessions"] = sum(s["route"] == "openclaw" for s in sessions)
    return out


def loop_figures(out: Path, settings: dict, ledger: dict) -> dict[str, Any]:
    loop = out / "loop"
    state = read_json(loop / "state.json")
    truth = _labels(out)
    heldout = {r["question"] for r in read_jsonl(out / "data" / "heldout.jsonl")}
    costs, sessions = _cost_lines(out), ledger.get("sessions") or []
    rounds = []
    for h in state["history"]:
        folder = loop / "rounds" / str(h["round"])
        decision = read_json(folder / "decision.json") if (folder / "decision.json").is_file() else {}
        said = [s["said"] for s in sessions if s["phase"] == h["round"]]
        rounds.append({
            "round": h["round"], "decision": "promoted" if h["promoted"] else "failed" if h.get("failed") else "refused",
            "reasons": h["reasons"], "seconds": _seconds(h.get("started_at"), h.get("decided_at")),
            "cost_line": costs.get(h["round"]), "choices": h.get("choices"),
            "dev": {k: decision.get(k, {}).get(TASK_ACCURACY) for k in ("current", "candidate")},
            "test": _test_figures(folder, decision.get("stage"), heldout, truth),
            "data": _round_data(folder, truth), "corrections_dropped": h.get("corrections_dropped") or {},
            "sessions_said": {k: said.count(k) for k in sorted(set(said))},
        })  # fmt: skip
    secrets = sum(r["data"]["secrets"] for r in rounds)
    poison = next((r for r in rounds if r["round"] == settings.get("poison_round")), None)
    verdict = None
    if poison is not None:
        paired = ((poison["test"] or {}).get("overall") or {}).get("paired") or {}
        verdict = ("refused by the gate" if poison["decision"] != "promoted" else
                   "promoted, not worse on test" if paired and paired["verdict"] != "significant fall" else
                   "promoted and WORSE on test")  # fmt: skip
    return {"settings": settings, "new_kind": NEW_KIND, "rounds": rounds, "serving": serving_figures(ledger),
            "poison": {"round": settings.get("poison_round") or None, "verdict": verdict,
                       "secrets_in_round_data": secrets}}  # fmt: skip


def _pct(r: dict | None) -> str:
    if not r or r.get("value") is None:
        return "-"
    return f"{100 * r['value']:.1f}% [{100 * r['low']:.1f}, {100 * r['high']:.1f}] (n={r['n']})"


def _delta(p: dict | None) -> str:
    if not p:
        return "-"
    return f"{100 * p['delta']:+.1f} pts [{100 * p['low']:+.1f}, {100 * p['high']:+.1f}], p={p['p']:.3g}"


def markdown(fig: dict) -> str:
    s = fig["settings"]
    lines = ["# Live loop demo", "",
             f"Starting model trained without `{fig['new_kind']}`; {s['rounds']} rounds"
             + (f", round {s['poison_round']} poisoned ({s['poison_share']:.0%} of its sessions)" if s.get("poison_round") else "")
             + f"; `openclaw agent --local` aimed at {s['openclaw_share']:.0%} of the sessions and had "
             f"{fig['serving']['openclaw_sessions']} of {fig['serving']['sessions']}; {s['seconds']:.0f} s in all"
             + (f" (load average {s['load_average'][0]} at the start, {s['load_average'][1]} at the end)" if s.get("load_average") else "")
             + ".", "",
             "Task accuracy on each round's test split (the frozen held-out rows the gate did not read), 95% Wilson "
             "interval; candidate vs served paired on the same prompts (exact McNemar, Newcombe interval).", "",
             "| round | decision | part | served | candidate | candidate − served |", "|---|---|---|---|---|---|"]  # fmt: skip
    names = {"overall": "all", "new_kind": f"new kind ({fig['new_kind']})", "old_kinds": "the other kinds"}
    for r in fig["rounds"]:
        t = r["test"] or {}
        for part, name in names.items():
            o = t.get(part) or {}
            lines.append(f"| {r['round']} | {r['decision']} | {name} | {_pct(o.get('served'))} | "
                         f"{_pct(o.get('candidate'))} | {_delta(o.get('paired'))} |")  # fmt: skip
    lines += ["", "| round | new turns trained on (new kind, corrected) | replayed rows | poisoned targets kept (wrong type, credential) | "
              "dropped by the filter | dev: served → candidate (n, MDE) | served answers cached | seconds | cost said before |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in fig["rounds"]:
        d, t, dev = r["data"], r["test"] or {}, r["dev"]
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(r["corrections_dropped"].items())) or "0"
        dev_text = (f"{dev['current']:.3f} → {dev['candidate']:.3f} (n={t.get('dev_n')}, MDE {t.get('dev_mde_points')} pts)"
                    if dev.get("current") is not None and dev.get("candidate") is not None else "-")  # fmt: skip
        lines.append(f"| {r['round']} | {d['rows']} ({d['new_kind']}, {d['corrected_targets']}) | {d.get('replayed', 0)} | "
                     f"{d['wrong_label_targets']}, {d['credential_request_targets']} | {dropped} | {dev_text} | "
                     f"{t.get('served_answers_cached')}/{t.get('served_answers')} | {r['seconds']} | {r['cost_line'] or '-'} |")  # fmt: skip
    sv = fig["serving"]
    lines += ["", f"Serving: {sv['requests']} requests, {sv['failed']} failed; {sv['sessions']} sessions, "
              f"{sv['openclaw_sessions']} through OpenClaw.", "",
              "| route | idle: n, p50, p95 (s) | while a round trains: n, p50, p95 (s) |", "|---|---|---|"]  # fmt: skip
    for route in ("http", "openclaw"):
        idle, busy = sv[f"{route}_idle"], sv[f"{route}_training"]
        lines.append(
            f"| {route} | {idle['n']}, {idle['p50']}, {idle['p95']} | {busy['n']}, {busy['p50']}, {busy['p95']} |"
        )
    p = fig["poison"]
    lines += ["", f"Poison: round {p['round'] or '-'}: {p['verdict'] or 'no poison round'}; secrets in any round's "
              f"training data: {p['secrets_in_round_data']}.", ""]  # fmt: skip
    for r in fig["rounds"]:
        lines.append(f"- round {r['round']} ({r['decision']}): {'; '.join(r['reasons'])}")
    return "\n".join(lines) + "\n"


def write_loop_report(out: Path, settings: dict, ledger: dict) -> dict:
    fig = loop_figures(out, settings, ledger)
    write_json(out / "loop_report.json", fig)
    write_json(out / "loop_users.json", ledger)
    atomic_write_text(out / "loop_report.md", markdown(fig))
    return fig
