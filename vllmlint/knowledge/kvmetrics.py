"""What a KV connector says about its transfers: decode's `KV Transfer metrics` log line in every
release format, and NixlConnector's Prometheus series on `/metrics`.

The log line (vLLM's `KVConnectorLogging.log`, once per stats interval on the engine that pulls):

    KV Transfer metrics: Num successful transfers=3, Avg xfer time (ms)=25.1, P90 xfer time (ms)=31.0, ...

* 0.29/0.30 keys: `Num successful transfers`, `Avg xfer time (ms)`, `P90 xfer time (ms)`,
  `Avg post time (ms)`, `P90 post time (ms)`, `Avg MB per transfer`, `Throughput (MB/s)`,
  `Avg number of descriptors`;
* 0.31 appends `Num failed transfers` and `Num KV expired reqs`; 0.32 `Num notifs after expiry`;
* an interval with only failures prints 0 for every timing;
* under MultiConnector each connector's dict is printed as a Python literal:
  `NixlConnector={'Num successful transfers': 1, 'Avg xfer time (ms)': np.float64(25.1), ...}`
  (numpy 2 reprs its scalars as `np.float64(...)`); older releases printed
  `KVConnectorType: NixlConnector, KV Transfer metrics: ...`.

Counts are summed over tensor-parallel ranks; throughput is per rank. Several lines (intervals)
are combined weighted by their successful transfers. Values are read with `ast.literal_eval`
(never evaluated). Pure standard library; `prometheus_client`'s text parser is used for
`/metrics` when it is installed, else a small parser of the same exposition format.
"""
from __future__ import annotations

import ast
import math
import re
from ..model.record import field, record

SUCCESS = "Num successful transfers"
AVG_MS = "Avg xfer time (ms)"
P90_MS = "P90 xfer time (ms)"
AVG_POST_MS = "Avg post time (ms)"
P90_POST_MS = "P90 post time (ms)"
AVG_MB = "Avg MB per transfer"
THROUGHPUT = "Throughput (MB/s)"
DESCRIPTORS = "Avg number of descriptors"
FAILED = "Num failed transfers"
EXPIRED = "Num KV expired reqs"
NOTIFS_AFTER_EXPIRY = "Num notifs after expiry"
COUNTS = (SUCCESS, FAILED, EXPIRED, NOTIFS_AFTER_EXPIRY, "Num failed recvs")

LINE_RE = re.compile(r"(?:KVConnectorType: (?P<ctype>[\w.]+), )?KV Transfer metrics: (?P<body>.*?)\s*$")
_NP_SCALAR = re.compile(r"\b(?:np|numpy)\.\w+\(([^()]*)\)")
_KEY_RE = re.compile(r"(?:^|, )([A-Za-z][\w .()/%-]*?)=")


@record
class KVMetricsLine:
    """One `KV Transfer metrics` line: per connector its key -> value (numbers as floats)."""
    connectors: dict[str, dict[str, float | str]]
    line: str

    def nixl(self) -> dict[str, float | str] | None:
        """The NixlConnector part (the only part, when the line names no connector)."""
        for name, values in self.connectors.items():
            if "Nixl" in name:
                return values
        return self.connectors.get("") if "" in self.connectors else None


def _number(value):
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    text = _NP_SCALAR.sub(r"\1", text)
    try:
        return float(text)
    except ValueError:
        return text


def _split_pairs(body: str) -> list[tuple[str, str]]:
    """`k=v, k=v` where a value may itself be a `{...}` literal holding `, ` and `=`."""
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(body)
    while i < n:
        eq = body.find("=", i)
        if eq < 0:
            break
        key = body[i:eq].strip().lstrip(",").strip()
        j = eq + 1
        if j < n and body[j] == "{":
            depth, k, quote = 0, j, None
            while k < n:
                c = body[k]
                if quote:
                    if c == quote:
                        quote = None
                elif c in "'\"":
                    quote = c
                elif c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        k += 1
                        break
                k += 1
            pairs.append((key, body[j:k]))
            i = k
            if body.startswith(", ", i):
                i += 2
            continue
        # a plain value runs to the next ", Key=" (keys hold spaces and parentheses)
        m = _KEY_RE.search(body, j)
        end = m.start() if m else n
        pairs.append((key, body[j:end]))
        i = end + 2 if m else n
    return pairs


def parse_line(line: str) -> KVMetricsLine | None:
    """One log line (any prefix) -> its metrics, or None when it holds no `KV Transfer metrics`."""
    m = LINE_RE.search(line)
    if not m:
        return None
    connectors: dict[str, dict[str, float | str]] = {}
    flat: dict[str, float | str] = {}
    for key, raw in _split_pairs(m.group("body")):
        raw = raw.strip()
        if raw.startswith("{"):
            try:
                value = ast.literal_eval(_NP_SCALAR.sub(r"\1", raw))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                connectors[key] = {str(k): _number(v) for k, v in value.items()}
            continue
        flat[key] = _number(raw)
    if flat:
        connectors[m.group("ctype") or ""] = flat
    if not connectors:
        return None
    return KVMetricsLine(connectors, line.strip())


def parse_log(text: str) -> list[KVMetricsLine]:
    """Every `KV Transfer metrics` line of a log (decode's, or `kubectl logs` of it)."""
    return [row for row in (parse_line(l) for l in text.splitlines() if "KV Transfer metrics" in l) if row]


@record
class TransferSummary:
    """Transfers over one or more intervals (log lines) or between two /metrics readings."""
    transfers: int = 0
    avg_ms: float | None = None
    p90_ms: float | None = None          # the largest interval P90 (log), or a bucket bound (/metrics)
    avg_post_ms: float | None = None
    mb_per_transfer: float | None = None
    throughput_mb_s: float | None = None  # per rank, as vLLM reports it
    failed: int = 0
    expired: int = 0
    notifs_after_expiry: int = 0
    intervals: int = 0
    source: str = ""
    lines: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("transfers", "avg_ms", "p90_ms", "avg_post_ms", "mb_per_transfer",
                                              "throughput_mb_s", "failed", "expired", "notifs_after_expiry",
                                              "intervals", "source")}


def _f(values: dict, key: str) -> float:
    v = values.get(key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0.0


def summarize(rows: list[KVMetricsLine]) -> TransferSummary:
    """NixlConnector's transfers over several intervals: counts summed, averages weighted by each
    interval's successful transfers, P90 the worst interval's (P90s do not combine), throughput the
    MB moved over the time spent (per rank)."""
    out = TransferSummary(source="log")
    total_ms = total_mb = post_ms = 0.0
    for row in rows:
        v = row.nixl()
        if v is None:
            continue
        out.intervals += 1
        out.lines.append(row.line)
        n = _f(v, SUCCESS)
        out.failed += int(_f(v, FAILED))
        out.expired += int(_f(v, EXPIRED))
        out.notifs_after_expiry += int(_f(v, NOTIFS_AFTER_EXPIRY))
        if n <= 0:
            continue                       # a failures-only interval prints 0 timings
        out.transfers += int(n)
        total_ms += _f(v, AVG_MS) * n
        total_mb += _f(v, AVG_MB) * n
        post_ms += _f(v, AVG_POST_MS) * n
        p90 = _f(v, P90_MS)
        out.p90_ms = p90 if out.p90_ms is None else max(out.p90_ms, p90)
        if AVG_POST_MS in v:
            out.avg_post_ms = 0.0
    if out.transfers:
        out.avg_ms = round(total_ms / out.transfers, 3)
        out.mb_per_transfer = round(total_mb / out.transfers, 4)
        if out.avg_post_ms is not None:
            out.avg_post_ms = round(post_ms / out.transfers, 3)
        out.throughput_mb_s = round(total_mb / (total_ms / 1e3), 3) if total_ms > 0 else None
    return out


# -- /metrics ---------------------------------------------------------------------------------------
@record
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def _parse_prometheus_small(text: str) -> list[Sample]:
    """The text exposition format, enough for counters and histograms: `name{l="v",...} value`."""
    out = []
    label_re = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        labels = dict(label_re.findall(m.group(2) or ""))
        out.append(Sample(m.group(1), labels, value))
    return out


def parse_prometheus(text: str) -> list[Sample]:
    """Every sample of a /metrics page (prometheus_client's parser when installed)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return _parse_prometheus_small(text)
    try:
        return [Sample(s.name, dict(s.labels), float(s.value))
                for fam in text_string_to_metric_families(text) for s in fam.samples]
    except (ValueError, TypeError):
        return _parse_prometheus_small(text)


NIXL_SERIES = ("vllm:nixl_xfer_time_seconds", "vllm:nixl_post_time_seconds", "vllm:nixl_bytes_transferred",
               "vllm:nixl_num_descriptors", "vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications",
               "vllm:nixl_num_kv_expired_reqs")


def nixl_reading(text: str) -> dict:
    """NixlConnector's series in a /metrics page, summed over label sets (engines, ranks):
    `{name_count|_sum|_total: value, name_bucket: {le: cumulative count}}`."""
    out: dict = {}
    for s in parse_prometheus(text):
        if not s.name.startswith("vllm:nixl_"):
            continue
        if s.name.endswith("_bucket"):
            le = s.labels.get("le", "+Inf")
            buckets = out.setdefault(s.name, {})
            buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name.endswith(("_count", "_sum", "_total")) or s.name in NIXL_SERIES:
            key = s.name if s.name.endswith(("_count", "_sum", "_total")) else s.name + "_total"
            out[key] = out.get(key, 0.0) + s.value
    return out


def _bucket_quantile(before: dict, after: dict, q: float) -> float | None:
    """The upper bound of the bucket the q-quantile falls in, between two readings (seconds)."""
    bounds = []
    for le, count in after.items():
        try:
            bound = float(le)
        except ValueError:
            continue
        bounds.append((bound, count - before.get(le, 0.0)))
    bounds.sort()
    if not bounds or bounds[-1][1] <= 0:
        return None
    target = q * bounds[-1][1]
    for bound, count in bounds:
        if count >= target:
            return bound
    return None


def nixl_delta(before: dict, after: dict) -> TransferSummary:
    """Transfers between two `nixl_reading`s: count, average ms (and the P90 bucket bound), MB per
    transfer, failures."""
    def d(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)
    out = TransferSummary(source="/metrics")
    n = d("vllm:nixl_xfer_time_seconds_count")
    out.failed = int(d("vllm:nixl_num_failed_transfers_total") + d("vllm:nixl_num_failed_notifications_total"))
    out.expired = int(d("vllm:nixl_num_kv_expired_reqs_total"))
    if n <= 0:
        return out
    out.transfers = int(round(n))
    secs = d("vllm:nixl_xfer_time_seconds_sum")
    mb = d("vllm:nixl_bytes_transferred_sum") / 2**20
    out.avg_ms = round(secs / n * 1e3, 3)
    out.mb_per_transfer = round(mb / n, 4)
    out.throughput_mb_s = round(mb / secs, 3) if secs > 0 else None
    pn = d("vllm:nixl_post_time_seconds_count")
    if pn > 0:
        out.avg_post_ms = round(d("vllm:nixl_post_time_seconds_sum") / pn * 1e3, 3)
    p90 = _bucket_quantile(before.get("vllm:nixl_xfer_time_seconds_bucket", {}),
                           after.get("vllm:nixl_xfer_time_seconds_bucket", {}), 0.9)
    out.p90_ms = None if p90 is None or math.isinf(p90) else round(p90 * 1e3, 3)
    return out
