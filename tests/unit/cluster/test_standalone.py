"""das.cluster.standalone without starting Spark: the state file and its refusals."""

from __future__ import annotations

import os

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
