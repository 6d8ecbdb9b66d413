#!/usr/bin/env python3
"""The pcap cases with two workers (software distribution) against one worker.

    workers_test.py BINARY [CASE_DIR...]     (default: every tests/pcap/<case>/)

Each case is replayed as run_case.sh does (same inputs, --change files), once with
`--workers 1` and once with `--workers 2` (lcores 0-1: this process's main lcore runs worker 0,
which reads the inputs and hands every packet to the worker of its flow; worker 1 runs on its
own lcore, so on a 2-CPU machine the two share the CPUs with everything else: slow, never
wrong). Then, for the two-worker run:

1. check_case.py on it: one verdict per input frame, forwarded frames leave the other side
   unchanged (as a multiset), answers match rejects, the summary agrees with the verdicts, and
   every verdict matches the case's hand-written intent.tsv;
2. the same verdict as one worker for every packet (side, verdict, stage, rule, reason,
   backend, new flow, generation) and the same flows: packets share a flow with two workers
   exactly when they share one with one worker. A flow id carries its worker (high half =
   worker + 1), so this is also "both directions of every flow (and every fragment of a
   datagram) on one worker";
3. the same summary (every counter) apart from "workers" and "per_worker", and the
   per-worker counters add up to the totals (rx per side, tx per side, verdicts, drops per
   reason, flows created; packets handed off = packets handed in);
4. the same frames out of each side and the same events, as multisets (across flows their
   order depends on the two workers' scheduling); events with flow ids mapped from one run to
   the other.

Aging is the one thing allowed to differ: the sweep that expires idle flows walks each
worker's table by slot at a rate set by the capture's time, and a flow sits in another slot of
another table with two workers, so a flow the sweep reaches before the end of the input with
one worker may be ended at shutdown with two (or the other way round). So a flow-end event's
reason "timeout" and "shutdown" count as one (its timestamp, the time the flow was ended,
is left out; so is "flow_end" in DPI alerts raised at a flow's end), and the summary's
flows.expired and flows.active_at_end are compared as their sum. Verdicts never depend on it:
a packet of a flow idle past its timeout starts a new flow whether or not the sweep ended it.

Cases listed in DIFFERENT below exceed a per-worker table with one worker and not with two
(each worker has its own); for them only (1) without intent.tsv and the sums of (3) apply.
At the end, both workers must have judged packets of some case (the hash spread flows).
Exits 1 on any difference, printing each.
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_case  # noqa: E402  (read_pcap)

# Cases whose verdicts differ by design with two workers: a per-worker table (capacity per
# worker) is what they exercise, and two workers have two of them.
DIFFERENT = {
    "flow_table_full": "flow_table.capacity_per_worker 1024: two workers hold twice the flows",
}


def case_inputs(case):
    if os.path.exists(os.path.join(case, "input.pcap")):
        args = ["--in", os.path.join(case, "input.pcap")]
    else:
        args = ["--in", os.path.join(case, "input_a.pcap")]
        if os.path.exists(os.path.join(case, "input_b.pcap")):
            args += ["--in-b", os.path.join(case, "input_b.pcap")]
    changes = os.path.join(case, "changes.tsv")
    if os.path.exists(changes):
        for line in open(changes):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            at, f = line.split("\t")
            args += ["--change", f"{at}:{os.path.join(case, f)}"]
    return args


def replay(binary, case, workers, out):
    os.makedirs(out)
    cmd = [binary, "replay", "--config", os.path.join(case, "config.json"), *case_inputs(case),
           "--out", f"{out}/out_b.pcap", "--out-a", f"{out}/out_a.pcap",
           "--verdicts", f"{out}/verdicts.jsonl", "--events", f"{out}/events.jsonl",
           "--summary-json", f"{out}/summary.json", "--quiet", "--workers", str(workers)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"replay --workers {workers} exited {r.returncode}: {r.stderr[-2000:]}")


def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def flow_map(v1, v2, errors):
    """flow id (1 worker) -> flow id (2 workers), checking it is one-to-one."""
    fwd, back = {}, {}
    for a, b in zip(v1, v2):
        fa, fb = a["flow_id"], b["flow_id"]
        if (fa is None) != (fb is None):
            errors.append(f"packet {a['index']}: flow {fa} with one worker, {fb} with two")
            continue
        if fa is None:
            continue
        if fwd.setdefault(fa, fb) != fb or back.setdefault(fb, fa) != fa:
            errors.append(f"packet {a['index']}: flows differ (one worker {fa} -> {fwd[fa]}, "
                          f"two workers {fb} <- {back[fb]})")
    return fwd


def check_sums(s2, errors):
    pw = s2.get("per_worker")
    if not pw or len(pw) != 2:
        errors.append(f"summary: per_worker {pw!r} (two workers expected)")
        return
    total = lambda f: sum(f(w) for w in pw)
    for side in ("A", "B"):
        if total(lambda w: w["rx_packets"][side]) != s2["ports"][side]["rx_packets"]:
            errors.append(f"per-worker rx {side} does not add up to the port's")
        if total(lambda w: w["tx_packets"][side]) != s2["ports"][side]["tx_packets"]:
            errors.append(f"per-worker tx {side} does not add up to the port's")
    for v in ("forward", "drop", "reject"):
        if total(lambda w: w["verdicts"][v]) != s2["verdicts"][v]:
            errors.append(f"per-worker {v} verdicts do not add up")
    reasons = set(s2["drops"]) | {r for w in pw for r in w["drops"]}
    for r in reasons:
        if total(lambda w: w["drops"].get(r, 0)) != s2["drops"].get(r, 0):
            errors.append(f"per-worker drops {r} do not add up")
    if total(lambda w: w["flows_created"]) != s2["flows"]["created"]:
        errors.append("per-worker flows created do not add up")
    if total(lambda w: w["handed_off"]) != total(lambda w: w["handed_in"]):
        errors.append("packets handed off != packets handed in")


ENDED = {"timeout": "ended", "shutdown": "ended"}


def event_key(e, fmap, seen):
    """`seen`: the flow ids some packet's verdict carries (this run's). A flow no packet
    carries (a NAT reverse entry nothing answered on) has an id that maps to nothing: its
    events are compared without it."""
    e = json.loads(json.dumps(e))
    if "flow_id" in e and e["flow_id"] not in seen:
        e["flow_id"] = "no packet"
    elif "flow_id" in e and e["flow_id"] in fmap:
        e["flow_id"] = fmap[e["flow_id"]]
    if e.get("event_type") == "flow":
        e.pop("timestamp", None)
        e["flow"]["reason"] = ENDED.get(e["flow"].get("reason"), e["flow"].get("reason"))
    if isinstance(e.get("alert"), dict) and "flow_end" in e["alert"]:
        e["alert"]["flow_end"] = ENDED.get(e["alert"]["flow_end"], e["alert"]["flow_end"])
        e.pop("timestamp", None)
    return json.dumps(e, sort_keys=True)


def check_case_dir(binary, case, work, stats):
    name = os.path.basename(case.rstrip("/"))
    errors = []
    one, two = os.path.join(work, name, "w1"), os.path.join(work, name, "w2")
    replay(binary, case, 1, one)
    replay(binary, case, 2, two)
    different = name in DIFFERENT
    cc = [sys.executable, os.path.join(HERE, "check_case.py"), case, two]
    r = subprocess.run(cc, capture_output=True, text=True)
    if r.returncode != 0:
        out = [l for l in r.stdout.splitlines() if l.strip()]
        if different:  # intent.tsv describes one worker: keep the other checks
            out = [l for l in out if "intended" not in l and "intent.tsv" not in l
                   and not l.rstrip().endswith("problem(s):")
                   and not l.strip().startswith("... and ")]
        errors += [f"check_case: {l}" for l in out[:20]]
    s2 = json.load(open(f"{two}/summary.json"))
    check_sums(s2, errors)
    for w in s2.get("per_worker", []):
        if w["rx_packets"]["A"] + w["rx_packets"]["B"] > 0:
            stats[w["worker"]] += 1
    if not different:
        v1, v2 = lines(f"{one}/verdicts.jsonl"), lines(f"{two}/verdicts.jsonl")
        if len(v1) != len(v2):
            errors.append(f"{len(v1)} verdicts with one worker, {len(v2)} with two")
        fields = ("index", "side", "verdict", "stage", "rule", "reason", "backend", "new_flow",
                  "generation")
        for a, b in zip(v1, v2):
            da = {k: a.get(k) for k in fields}
            db = {k: b.get(k) for k in fields}
            if da != db:
                errors.append(f"packet {a['index']}: one worker {da}, two workers {db}")
        fmap = flow_map(v1, v2, errors)
        s1 = json.load(open(f"{one}/summary.json"))
        for s in (s1, s2):
            s.pop("workers", None)
            s.pop("per_worker", None)
            fl = s["flows"]
            fl["ended_or_active"] = fl.pop("expired") + fl.pop("active_at_end")
        if s1 != s2:
            for k in sorted(set(s1) | set(s2)):
                if s1.get(k) != s2.get(k):
                    errors.append(f"summary {k}: one worker {s1.get(k)}, two workers {s2.get(k)}")
        for f in ("out_b.pcap", "out_a.pcap"):
            a = collections.Counter(check_case.read_pcap(f"{one}/{f}"))
            b = collections.Counter(check_case.read_pcap(f"{two}/{f}"))
            if a != b:
                errors.append(f"{f}: {sum((a - b).values())} frame(s) only with one worker, "
                              f"{sum((b - a).values())} only with two")
        seen1 = {v["flow_id"] for v in v1 if v["flow_id"] is not None}
        seen2 = {v["flow_id"] for v in v2 if v["flow_id"] is not None}
        e1 = collections.Counter(event_key(e, fmap, seen1) for e in lines(f"{one}/events.jsonl"))
        e2 = collections.Counter(event_key(e, {}, seen2) for e in lines(f"{two}/events.jsonl"))
        if e1 != e2:
            only1, only2 = list((e1 - e2).elements()), list((e2 - e1).elements())
            errors.append(f"events: {len(only1)} only with one worker, {len(only2)} only with "
                          f"two; first: {(only1 or only2)[0][:300]}")
            if os.environ.get("WORKERS_TEST_VERBOSE"):
                errors += [f"  one: {e}" for e in only1] + [f"  two: {e}" for e in only2]
    return errors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    cases = sys.argv[2:] or sorted(
        os.path.join(HERE, d) for d in os.listdir(HERE)
        if os.path.isfile(os.path.join(HERE, d, "config.json")))
    stats = collections.Counter()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pcap_workers.") as work:
        for case in cases:
            name = os.path.basename(case.rstrip("/"))
            try:
                errors = check_case_dir(binary, case, work, stats)
            except RuntimeError as e:
                errors = [str(e)]
            tag = " (per-worker tables: sums and consistency only)" if name in DIFFERENT else ""
            if errors:
                failed += 1
                print(f"FAIL {name}{tag}")
                for e in errors[:25]:
                    print(f"  {e}")
            else:
                print(f"ok   {name}{tag}")
    if len(cases) > 3 and (stats[0] == 0 or stats[1] == 0):
        print(f"FAIL: a worker judged nothing in every case (cases with packets per worker: "
              f"{dict(stats)})")
        failed += 1
    print(f"{len(cases) - failed if failed <= len(cases) else 0} of {len(cases)} cases "
          f"identical with two workers; cases where each worker judged packets: {dict(stats)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
