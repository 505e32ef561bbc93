"""The dashboard's server (``services/dashboard/server.py``): its JSON, and the page in real headless Chromium (Debian's
package).

The browser test loads the page on a real tiny run (RFT+GRPO, evaluated), checks that it loads with no console
error, that each curve has as many points as the run logged steps, and that appending metrics to the run's
``events.jsonl`` (as a training run does) shows the new points without a reload. Without Chromium it skips,
unless ``ARK_REQUIRE_BROWSER=1`` (scripts/test.sh sets it, and installs ``chromium`` when missing). With
``ARK_DASHBOARD_SCREENSHOT=PATH`` it also saves a screenshot there (docs/dashboard.png is made this way).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.services.dashboard.server import make_server
from tests.cdp_pipe import Chromium, find_chromium
from tests.tiny_runs import assets, flags  # noqa: F401 - the module fixture is reused


@pytest.fixture(scope="module")
def runs_root(assets, tmp_path_factory) -> Path:  # noqa: F811
    """A folder holding one real evaluated RFT+GRPO run (``runs/qc``) and a folder that is not a run."""
    root = tmp_path_factory.mktemp("runs")
    args = flags(assets, root / "qc", "RFT+GRPO", steps=8)
    args[args.index("--eval_auto") + 1] = "True"
    assert main(["train", *args, "--rft_steps", "3"]) == 0
    (root / "notes").mkdir()
    return root


def _serving(root: Path):  # polled every 0.05 s: shutdown() waits one poll (0.5 s by default)
    srv = make_server([root], port=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def server(runs_root):
    yield from _serving(runs_root)


@pytest.fixture
def bare_server(tmp_path):
    """A server over a root holding only a folder that is not a run (``notes``): a server knows a run's key
    from a listing, and no listing comes before these refusals, so the real run would change nothing."""
    (tmp_path / "notes").mkdir()
    yield from _serving(tmp_path)


def get(srv, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}{path}", timeout=30) as response:
        return json.loads(response.read()) if "/api/" in path else response.read()


def grpo_steps(run: Path) -> int:
    events = read_jsonl(run / "events.jsonl")
    return len({e["step"] for e in events if e["event"] == "metrics" and e["stage"] == "grpo"})


@pytest.mark.slow
def test_the_server_lists_runs_and_serves_one_by_key(server, runs_root):
    assert server.server_address[0] == "127.0.0.1"
    runs = get(server, "/api/runs")["runs"]
    assert [(r["name"], r["state"]) for r in runs] == [("qc", "finished")]
    run = get(server, "/api/run?key=" + urllib.request.quote(runs[0]["key"]))
    assert len(run["stages"]["grpo"]["step"]) == grpo_steps(runs_root / "qc") == 5
    assert {"reward", "loss", "kl", "entropy", "frac_reward_zero_std", "learning_rate", "step_time"} <= set(
        run["stages"]["grpo"]
    )
    assert [t["stage"] for t in run["timeline"]][:3] == ["eval_base", "eval_base_dev", "rft_sampling"]
    assert list(run["evals"]["models"]) == ["base", "rft", "grpo"]
    assert run["diagnosis"]["status"] == "finished"
    assert b"uPlot" in get(server, "/static/uPlot.iife.min.js")[:2000]


def test_the_server_serves_no_other_path(bare_server, tmp_path):
    server = bare_server
    for path in (
        "/api/run?key=" + urllib.request.quote(str(tmp_path / "notes")),
        "/static/../server.py",
        "/x",
    ):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(server, path)
        assert err.value.code == 404


@pytest.fixture
def browser(tmp_path):
    exe = find_chromium()
    if exe is None:
        if os.environ.get("ARK_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium not found (scripts/test.sh installs it; ARK_REQUIRE_BROWSER=1)")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    chrome = Chromium(exe, tmp_path / "profile")
    yield chrome
    chrome.close()


@pytest.mark.slow
def test_the_page_shows_live_curves_in_a_real_browser(server, runs_root, browser, tmp_path):
    run = runs_root / "qc"
    n = grpo_steps(run)
    browser.goto(f"http://127.0.0.1:{server.server_port}/")
    points = "document.querySelector('#chart-grpo-reward')?.getAttribute('data-points')"
    assert browser.wait_for(points) == str(n)
    assert browser.eval("document.querySelector('#chart-rft-loss').getAttribute('data-points')") == "3"
    charts = browser.eval("[...document.querySelectorAll('#grid-grpo .chart')].map(c => c.id)")
    for name in ("reward", "loss", "kl", "entropy", "zero_std", "length", "lr", "time"):
        assert f"chart-grpo-{name}" in charts
    series = browser.eval(
        "[...document.querySelectorAll('#chart-grpo-reward .u-legend th')].map(t => t.textContent)"
    )
    assert any("rewards/" in s for s in series)  # each grader next to the total
    legend = "[...document.querySelectorAll('#chart-grpo-reward .u-legend .u-value')].map(t => t.textContent)"
    values = browser.eval(legend)
    assert values[0] == str(n) and "--" not in values  # the latest step's values, before any hover
    assert browser.eval("document.querySelectorAll('#timeline tr[data-stage]').length") >= 5
    assert browser.eval("document.querySelector('#evals table.eval').rows[0].cells.length") == 4  # metric + 3
    assert browser.eval("document.querySelector('#run-state').textContent") == "finished"
    if os.environ.get("ARK_DASHBOARD_SCREENSHOT"):
        browser.screenshot(Path(os.environ["ARK_DASHBOARD_SCREENSHOT"]))

    # the run trains on: a live heartbeat (this process's pid) and two more GRPO steps appended
    beat = json.loads((run / "heartbeat.json").read_text())
    live = {**beat, "state": "running", "pid": os.getpid(), "updated_ts": time.time(), "interval": 60}
    (run / "heartbeat.json").write_text(json.dumps(live))
    logged = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "metrics" and e["stage"] == "grpo"]
    last = logged[-1]
    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:  # as the training loop appends them
        for step in (last["step"] + 1, last["step"] + 2):
            fh.write(json.dumps({**last, "step": step, "reward": 0.9}) + "\n")
    assert browser.wait_for(f"{points} === '{n + 2}' && {points}")
    assert browser.wait_for("document.querySelector('#run-state').textContent === 'running'")
    assert browser.eval("performance.getEntriesByType('navigation').length") == 1  # no reload
    browser.screenshot(tmp_path / "dashboard.png")
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    assert browser.errors == []


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "127.0.0.1.nip.io:{port}", "localhost:1", "", "LOCALHOST:{port}x"]
)
def test_a_host_that_is_not_loopback_is_refused(tmp_path, host):
    """DNS rebinding: a page whose name now points at 127.0.0.1 gets nothing of the runs."""
    import http.client

    (tmp_path / "runs").mkdir()
    srv = make_server([tmp_path / "runs"], port=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        for path, want in (("/api/runs", 403), ("/", 403)):
            conn = http.client.HTTPConnection("127.0.0.1", srv.server_port, timeout=30)
            conn.putrequest("GET", path, skip_host=True)
            conn.putheader("Host", host.format(port=srv.server_port))
            conn.endheaders()
            assert conn.getresponse().status == want, (host, path)
            conn.close()
        assert "runs" in get(srv, "/api/runs")  # the loopback name still works
    finally:
        srv.shutdown()
        srv.server_close()
