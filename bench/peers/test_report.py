"""Unit tests of report.py on a hand-made results dict (no servers; standard library only):
  python3 -m unittest discover -s bench/peers -p 'test_*.py'
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


def phase(kind, c, p50, p99, rps, cpu, errors=0):
    return {"kind": kind, "concurrency": c, "p50_ms": p50, "p90_ms": p50, "p99_ms": p99, "rps": rps,
            "errors": errors, "server_cpu_ms_per_req": cpu, "server_cpu_cores": 1.5, "client_cpu_ms_per_req": 1.2}


def floor(p50, cpu, when="before"):
    return {"when": when, "runs": 100, "p50_ms": p50, "p99_ms": p50 * 2, "cpu_ms_per_run": cpu,
            "loadavg_1m": [1.0, 1.5]}


def results():
    return {
        "started": "2026-11-23T08:00:00",
        "host": {"nproc": 2, "cpu": "AMD EPYC", "cpu_flags": "avx2", "loadavg_start": [1, 2, 3],
                 "loadavg_end": [2, 2, 3]},
        "settings": {"seconds": 12, "warmup": 2, "floor_seconds": 4, "high_concurrency": 8},
        "request": {"image": "cat_tabby.jpg", "dtype": "float32", "shape": [1, 3, 224, 224], "bytes": 602112,
                    "grpc_bytes": {"kserve-grpc": 602150}, "rest_json_bytes": 3_090_999},
        "floors": [floor(10.0, 8.0), floor(14.0, 10.0), floor(20.0, 12.0, "after")],
        "servers": [
            {"name": "visionserve", "title": "visionserve", "grpc_kind": "tfs-grpc", "versions": "v",
             "cold_start": {"port_open_s": 0.5, "first_answer_s": 0.78}, "answer": {"grpc_argmax": 281},
             "loadavg_before": 1.0, "loadavg_after": 1.25, "rss_mb": 200.0,
             "phases": [phase("tfs-grpc", 1, 18.0, 30.0, 50.0, 13.0), phase("tfs-grpc", 8, 50.0, 90.0, 140.0, 14.4),
                        phase("rest-json", 1, 33.3, 40.0, 30.0, 40.0, errors=2)]},
            {"name": "kserve", "title": "KServe", "grpc_kind": "kserve-grpc", "error": "server exited with 1"},
        ],
    }


class ReportTest(unittest.TestCase):
    def test_summary_uses_the_floors_on_both_sides(self):
        s = report.summarize(results(), 0)
        self.assertEqual(s["floor_p50_ms"], 12.0)  # mean of 10 (before) and 14 (after)
        self.assertAlmostEqual(s["grpc1_ratio"], 1.5)
        self.assertEqual(s["grpc8_rps"], 140.0)
        self.assertEqual(s["grpc8_cpu_ms"], 14.4)
        self.assertEqual(s["rest1_p50_ms"], 33.3)
        self.assertEqual(s["cold_start_s"], 0.78)
        self.assertEqual(report.summarize(results(), 1)["floor_p50_ms"], 17.0)

    def test_main_table_has_the_issue_rows_and_names_the_visionserve_protocol(self):
        t = report.main_table(results())
        lines = t.splitlines()
        self.assertIn("visionserve (TF Serving gRPC Predict, tensor_content)", lines[0])
        self.assertEqual(lines[1], "|---|---:|---:|")
        self.assertIn("| gRPC c=1 p50 / onnxruntime floor | 1.50× (18.0 / 12.0 ms) |", t)
        self.assertIn("| gRPC c=1 p99 (ms) | 30.0 |", t)
        self.assertIn("| gRPC c=8 throughput (req/s) | 140.0 |", t)
        self.assertIn("| server CPU per request at c=8 (ms; floor ≈ 10.0) | 14.4 |", t)
        self.assertIn("| REST JSON c=1 p50 (ms, 3.1 MB body) | 33.3 (2 errors) |", t)
        self.assertIn("| server CPU over the floor's, c=1 / c=8 (ms per request) | +4.0 / +5.4 |", t)
        self.assertIn("| cold start to first answer (s) | 0.78 |", t)
        self.assertIn("| load average (1 min) before → after | 1.0 → 1.2 |", t)
        # a failed server keeps its column, with the reason in every figure's cell
        self.assertIn("failed: server exited with 1", lines[2])
        for line in lines:
            self.assertEqual(line.count("|"), 4, line)

    def test_markdown_renders_every_section(self):
        md = report.markdown(results())
        self.assertIn("602,112 B", md)
        self.assertIn("REST JSON body 3,090,999 B", md)
        self.assertIn("| visionserve | v | 281, –; – |", md)
        self.assertIn("| kserve | ", md)
        self.assertIn("| after | 100 | 20.0 | 40.0 | 12.0 | 1.0 → 1.5 |", md)

    def test_paired_rounds_give_the_excess_over_the_floor_next_to_them(self):
        r = results()
        r["settings"].update(paired_rounds=4, paired_seconds=3)
        r["servers"][0]["paired_c1"] = [
            {"floor_p50_ms": 6.0, "floor_p99_ms": 6.5, "p50_ms": 7.0, "p99_ms": 9.1, "errors": 0},
            {"floor_p50_ms": 9.0, "floor_p99_ms": 10.0, "p50_ms": 9.5, "p99_ms": 12.0, "errors": 0},
            {"error": "floor failed"},
            {"floor_p50_ms": 6.2, "floor_p99_ms": 6.4, "p50_ms": 7.4, "p99_ms": 8.0, "errors": 1},
        ]
        over, p99 = report.paired_cells(report.summarize(r, 0))
        self.assertEqual(over, "+1.00 (+0.50 … +1.20) (3 of 4 rounds) (1 errors)")
        self.assertEqual(p99, "1.25× (1.20 … 1.40)")
        table = report.main_table(r)
        self.assertIn("| gRPC c=1 p50 − floor p50, floor interleaved (4 rounds of a floor then 3 s c=1; ms: median "
                      "(range)) | +1.00 (+0.50 … +1.20) (3 of 4 rounds) (1 errors) | failed:", table)
        self.assertIn("| gRPC c=1 p99 / floor p99, floor interleaved (median (range)) | 1.25× (1.20 … 1.40) |", table)

    def test_no_paired_rows_without_paired_rounds(self):
        self.assertNotIn("interleaved", report.main_table(results()))

    def test_cpu_by_thread_row(self):
        r = results()
        # results from before the split have no thread figures
        self.assertIn("(ms per request: main · busiest · rest) | – / – |", report.main_table(r))
        g1, g8 = r["servers"][0]["phases"][:2]
        g1["server_threads_ms_per_req"] = {"main": 1.04, "busiest": [22.4, 0.02, 0.01], "rest": 0.1}
        g8["server_threads_ms_per_req"] = {"main": 1.2, "busiest": [11.5, 11.6, 0.1], "rest": 0.3}
        t = report.main_table(r)
        # threads under 0.05 ms per request join the rest; so does every thread past the second busiest
        self.assertIn("| server process CPU by thread, c=1 / c=8 (ms per request: main · busiest · rest) "
                      "| 1.0 · 22.4 · 0.1 / 1.2 · 11.5+11.6 · 0.4 |", t)

    def test_throughput_is_held_against_the_measured_ceiling(self):
        r = results()
        self.assertNotIn("ceiling", report.main_table(r))  # older results have none
        r["ceilings"] = [
            {"when": "before", "processes": 2, "runs_per_s": 150.0, "p50_ms": [13.0, 13.4],
             "cpu_ms_per_run": [12.9, 13.1], "loadavg_1m": [1.0, 1.2]},
            {"when": "after", "processes": 2, "runs_per_s": 130.0, "p50_ms": [15.0, 15.2],
             "cpu_ms_per_run": [14.9, 15.0], "loadavg_1m": [1.0, 1.2]},
            {"when": "broken", "error": "no onnxruntime"},
        ]
        t = report.main_table(r)
        # 140 req/s against the mean of the two measured ceilings (140 runs/s)
        self.assertIn("| gRPC c=8 throughput / measured two-process ceiling (140.0 runs/s) | 1.00× |", t)
        self.assertNotIn("gRPC throughput at", t)  # one level above c=1: no sweep row
        md = report.markdown(r)
        self.assertIn("| before | 150.0 | 13.0 / 13.4 | 12.9 / 13.1 |", md)
        self.assertIn("| broken | failed: no onnxruntime | | |", md)

    def test_conditions_name_the_server_warmup_when_there_is_one(self):
        r = results()
        self.assertNotIn("untimed gRPC c=1 traffic", report.markdown(r))
        r["settings"].update(server_warmup=30, rest_warmup=10)
        self.assertIn("Each server first gets 30 s of untimed gRPC c=1 traffic after its first answer "
                      "(the REST block 10 s).", report.markdown(r))

    def test_sweep_row_lists_every_grpc_concurrency_against_the_ceiling(self):
        r = results()
        r["servers"][0]["phases"] += [phase("tfs-grpc", 4, 30.0, 60.0, 126.0, 14.0),
                                      phase("tfs-grpc", 16, 99.0, 150.0, 133.0, 14.5, errors=1)]
        t = report.main_table(r)
        self.assertIn("| gRPC throughput at c=4/c=8/c=16 (req/s) | 126.0 / 140.0 / 133.0 (1 errors) |", t)
        r["ceilings"] = [{"when": "before", "processes": 2, "runs_per_s": 140.0, "p50_ms": [13.0, 13.4],
                          "cpu_ms_per_run": [12.9, 13.1], "loadavg_1m": [1.0, 1.2]}]
        t = report.main_table(r)
        self.assertIn("| gRPC throughput at c=4/c=8/c=16 (req/s, × ceiling) | 126.0 (0.90×) / 140.0 (1.00×) / "
                      "133.0 (0.95×) (1 errors) |", t)


if __name__ == "__main__":
    unittest.main()
