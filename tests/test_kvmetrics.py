"""The `KV Transfer metrics` line in every release format, and NixlConnector's /metrics series."""
from __future__ import annotations

import pytest

from vllmlint.knowledge import kvmetrics as km

PREFIX = "(EngineCore_DP0 pid=4242) INFO 12-02 07:35:22 [metrics.py:117] "

# 0.29 / 0.30 (NixlKVConnectorStats.reduce)
V030 = (PREFIX + "KV Transfer metrics: Num successful transfers=4, Avg xfer time (ms)=212.5, "
        "P90 xfer time (ms)=301.25, Avg post time (ms)=1.5, P90 post time (ms)=2.0, "
        "Avg MB per transfer=469.762, Throughput (MB/s)=2210.645, Avg number of descriptors=448.0")
# 0.31 appends failures and expiries
V031 = (PREFIX + "KV Transfer metrics: Num successful transfers=2, Avg xfer time (ms)=25.0, "
        "P90 xfer time (ms)=27.5, Avg post time (ms)=0.8, P90 post time (ms)=0.9, Avg MB per transfer=0.188, "
        "Throughput (MB/s)=7.52, Avg number of descriptors=6.0, Num failed transfers=1, Num KV expired reqs=0")
# 0.32 appends notifications that arrived after the blocks expired
V032 = (PREFIX + "KV Transfer metrics: Num successful transfers=1, Avg xfer time (ms)=40.0, "
        "P90 xfer time (ms)=40.0, Avg post time (ms)=1.0, P90 post time (ms)=1.0, Avg MB per transfer=0.5, "
        "Throughput (MB/s)=12.5, Avg number of descriptors=8.0, Num failed transfers=0, Num KV expired reqs=2, "
        "Num notifs after expiry=3")
# an interval with only failures prints 0 timings
FAIL_ONLY = (PREFIX + "KV Transfer metrics: Num successful transfers=0, Avg xfer time (ms)=0, P90 xfer time (ms)=0, "
             "Avg post time (ms)=0, P90 post time (ms)=0, Avg MB per transfer=0, Throughput (MB/s)=0, "
             "Avg number of descriptors=0, Num failed transfers=3, Num KV expired reqs=1")
# MultiConnector: each connector's reduce() dict, numpy 2 scalars as np.float64(...)
MULTI = (PREFIX + "KV Transfer metrics: NixlConnector={'Num successful transfers': 3, 'Avg xfer time (ms)': "
         "np.float64(10.0), 'P90 xfer time (ms)': 12.0, 'Avg post time (ms)': np.float64(0.5), "
         "'P90 post time (ms)': 0.6, 'Avg MB per transfer': np.float64(2.0), 'Throughput (MB/s)': "
         "np.float64(200.0), 'Avg number of descriptors': np.float64(4.0), 'Num failed transfers': 0, "
         "'Num KV expired reqs': 0}, LMCacheConnectorV1={'Num hits': 5}")
# older releases: the connector type before the line
TYPED = "INFO 06-01 10:00:00 [metrics.py:90] KVConnectorType: NixlConnector, KV Transfer metrics: " \
        "Num successful transfers=2, Avg xfer time (ms)=5.0, P90 xfer time (ms)=6.0, Avg MB per transfer=1.0, " \
        "Throughput (MB/s)=200.0, Avg number of descriptors=2.0"


def test_030_line_every_key():
    row = km.parse_line(V030)
    v = row.nixl()
    assert v == {"Num successful transfers": 4.0, "Avg xfer time (ms)": 212.5, "P90 xfer time (ms)": 301.25,
                 "Avg post time (ms)": 1.5, "P90 post time (ms)": 2.0, "Avg MB per transfer": 469.762,
                 "Throughput (MB/s)": 2210.645, "Avg number of descriptors": 448.0}
    s = km.summarize([row])
    assert (s.transfers, s.avg_ms, s.p90_ms, s.mb_per_transfer, s.failed) == (4, 212.5, 301.25, 469.762, 0)


def test_031_failed_and_expired():
    v = km.parse_line(V031).nixl()
    assert v[km.FAILED] == 1 and v[km.EXPIRED] == 0 and v[km.SUCCESS] == 2
    s = km.summarize([km.parse_line(V031)])
    assert s.failed == 1 and s.transfers == 2 and s.avg_ms == 25.0


def test_032_notifs_after_expiry():
    v = km.parse_line(V032).nixl()
    assert v[km.NOTIFS_AFTER_EXPIRY] == 3 and v[km.EXPIRED] == 2
    s = km.summarize([km.parse_line(V032)])
    assert (s.expired, s.notifs_after_expiry) == (2, 3)


def test_failures_only_interval_adds_no_timing():
    s = km.summarize(km.parse_log("\n".join([FAIL_ONLY, V031])))
    assert s.intervals == 2 and s.transfers == 2 and s.failed == 4 and s.expired == 1
    assert s.avg_ms == 25.0 and s.p90_ms == 27.5          # the zeros of the failing interval are not averaged in
    s = km.summarize([km.parse_line(FAIL_ONLY)])
    assert s.transfers == 0 and s.avg_ms is None and s.failed == 3


def test_multiconnector_dict_with_numpy_scalars():
    row = km.parse_line(MULTI)
    assert set(row.connectors) == {"NixlConnector", "LMCacheConnectorV1"}
    v = row.nixl()
    assert v[km.AVG_MS] == 10.0 and v[km.SUCCESS] == 3 and v[km.THROUGHPUT] == 200.0
    s = km.summarize([row])
    assert (s.transfers, s.avg_ms, s.mb_per_transfer, s.avg_post_ms) == (3, 10.0, 2.0, 0.5)


def test_older_typed_line():
    row = km.parse_line(TYPED)
    assert list(row.connectors) == ["NixlConnector"] and row.nixl()[km.SUCCESS] == 2


def test_intervals_weighted_by_transfers_and_counts_summed():
    # two intervals (counts are already summed over TP ranks by vLLM): 4 x 212.5 ms and 2 x 25 ms
    s = km.summarize(km.parse_log("noise\n" + V030 + "\nINFO other line\n" + V031 + "\n"))
    assert s.transfers == 6 and s.intervals == 2
    assert s.avg_ms == round((4 * 212.5 + 2 * 25.0) / 6, 3)
    assert s.mb_per_transfer == round((4 * 469.762 + 2 * 0.188) / 6, 4)
    assert s.p90_ms == 301.25                                # the worst interval's P90
    assert s.throughput_mb_s == round((4 * 469.762 + 2 * 0.188) / ((4 * 212.5 + 2 * 25.0) / 1e3), 3)


def test_not_a_metrics_line_and_malformed_dict():
    assert km.parse_line("INFO Avg prompt throughput: 1.0 tokens/s") is None
    assert km.parse_line(PREFIX + "KV Transfer metrics: NixlConnector={'Num successful transfers': __import__('os')}") is None
    assert km.parse_log("") == []


PROM_BEFORE = """# HELP vllm:nixl_xfer_time_seconds Histogram of transfer duration for NIXL KV Cache transfers.
# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.01",model_name="m"} 0.0
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="1.0",model_name="m"} 1.0
vllm:nixl_xfer_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1.0
vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 1.0
vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.05
# HELP vllm:nixl_bytes_transferred Histogram of bytes transferred per NIXL KV Cache transfers.
# TYPE vllm:nixl_bytes_transferred histogram
vllm:nixl_bytes_transferred_count{engine="0",model_name="m"} 1.0
vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 1048576.0
# HELP vllm:nixl_num_failed_transfers Number of failed NIXL KV Cache transfers.
# TYPE vllm:nixl_num_failed_transfers counter
vllm:nixl_num_failed_transfers_total{engine="0",model_name="m"} 0.0
"""


def _after(extra_ms: list[float], mb: float, failed: int) -> str:
    lines = PROM_BEFORE.splitlines()
    n = 1 + len(extra_ms)
    b01 = 1 + sum(1 for x in extra_ms if x <= 10)
    b1 = 1 + sum(1 for x in extra_ms if x <= 100)
    b10 = 1 + sum(1 for x in extra_ms if x <= 1000)
    total = 0.05 + sum(extra_ms) / 1e3
    rep = {'le="0.01"': 0, 'le="0.1"': b1, 'le="1.0"': b10, 'le="+Inf"': n}
    out = []
    for l in lines:
        for k, v in rep.items():
            if k in l:
                l = l.rsplit(" ", 1)[0] + f" {float(v)}"
        if l.startswith("vllm:nixl_xfer_time_seconds_count"):
            l = l.rsplit(" ", 1)[0] + f" {float(n)}"
        if l.startswith("vllm:nixl_xfer_time_seconds_sum"):
            l = l.rsplit(" ", 1)[0] + f" {total}"
        if l.startswith("vllm:nixl_bytes_transferred_sum"):
            l = l.rsplit(" ", 1)[0] + f" {1048576.0 + mb * 2**20 * len(extra_ms)}"
        if l.startswith("vllm:nixl_num_failed_transfers_total"):
            l = l.rsplit(" ", 1)[0] + f" {float(failed)}"
        out.append(l)
    del b01
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("small", [False, True])
def test_prometheus_delta(small, monkeypatch):
    if small:      # the fallback parser gives the same reading
        monkeypatch.setattr(km, "parse_prometheus", km._parse_prometheus_small)
    before = km.nixl_reading(PROM_BEFORE)
    assert before["vllm:nixl_xfer_time_seconds_count"] == 1.0
    after = km.nixl_reading(_after([200.0, 400.0, 300.0, 50.0], 4.0, 1))
    s = km.nixl_delta(before, after)
    assert s.transfers == 4 and s.avg_ms == 237.5 and s.mb_per_transfer == 4.0 and s.failed == 1
    assert s.p90_ms == 1000.0              # the bucket bound P90 falls in
    assert s.throughput_mb_s == round(16 / 0.95, 3)
    assert km.nixl_delta(after, after).transfers == 0


def test_prometheus_sums_label_sets():
    text = ('vllm:nixl_xfer_time_seconds_count{engine="0"} 2\n'
            'vllm:nixl_xfer_time_seconds_count{engine="1"} 3\n'
            'vllm:prompt_tokens_total{engine="0"} 9\n')
    assert km.nixl_reading(text) == {"vllm:nixl_xfer_time_seconds_count": 5.0}
