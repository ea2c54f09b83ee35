"""das.cluster.standalone without starting Spark: the state file and its refusals."""

from __future__ import annotations

import os
import time

import pytest

from das.cluster import standalone
from das.errors import UserError


def test_state_round_trip(tmp_path):
    cluster = standalone.Cluster(
        state_dir=str(tmp_path),
        master_port=7177,
        master_webui_port=8180,
        cores=1,
        memory="1g",
        master_pid=11,
        workers=(standalone.Worker(7178, 8181, 12), standalone.Worker(7179, 8182, 13)),
    )
    standalone.save_state(cluster)
    assert standalone.load_state(tmp_path) == cluster
    assert cluster.url == "spark://127.0.0.1:7177"


def test_a_second_cluster_on_the_same_state_is_refused(tmp_path):
    (tmp_path / standalone.STATE_FILE).write_text("{}")
    with pytest.raises(UserError, match="already up"):
        standalone.start_cluster(1, tmp_path)


def test_down_without_up_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no cluster state"):
        standalone.load_state(tmp_path)


def test_stopping_never_signals_a_process_that_is_not_a_spark_daemon(tmp_path):
    cluster = standalone.Cluster(str(tmp_path), 1, 2, 1, "1g", master_pid=os.getpid())
    standalone.save_state(cluster)
    standalone.stop_cluster(cluster)  # our own pid is not a Spark daemon: left alone
    assert not (tmp_path / standalone.STATE_FILE).exists()


def test_a_started_daemon_is_alive_until_it_exits_whatever_its_command_line_reads():
    """spark-class execs java: for a moment its command line reads empty. A child of this
    process is judged by waitpid, not by its command line (which here never names Spark)."""
    pid = os.posix_spawn("/bin/sleep", ["/bin/sleep", "0.5"], dict(os.environ))
    assert standalone._alive(pid)
    deadline = time.monotonic() + 10
    while standalone._alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not standalone._alive(pid)  # exited and reaped: a reused pid is not taken for it
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_restarted_worker_starts_only_once_the_master_has_dropped_the_old_one(
    tmp_path, monkeypatch
):
    """The master refuses (and so stops) a worker on the address of one it still lists; a
    status page that does not answer (None) must not be read as "no longer listed"."""
    port = 7178
    cluster = standalone.Cluster(
        str(tmp_path),
        7177,
        8180,
        1,
        "1g",
        master_pid=11,
        workers=(standalone.Worker(port, 8181, 12),),
    )
    pages = iter([None, {"workers": [{"port": port, "state": "ALIVE"}]}, None])
    seen: list[object] = []

    def status(_cluster, timeout=2.0):
        page = next(pages, {"workers": [{"port": port, "state": "DEAD"}]})
        seen.append(page)
        return page

    def start(_cluster, index):
        assert seen[-1] == {"workers": [{"port": port, "state": "DEAD"}]}
        return 99

    monkeypatch.setattr(standalone, "master_status", status)
    monkeypatch.setattr(standalone, "_kill_group", lambda pid: None)
    monkeypatch.setattr(standalone, "_start_worker", start)
    monkeypatch.setattr(standalone, "wait_registered", lambda cluster, timeout: None)
    restarted = standalone.restart_worker(cluster, 0, timeout=30)
    assert restarted.workers[0].pid == 99
    assert len(seen) == 4
    assert standalone.load_state(tmp_path) == restarted
