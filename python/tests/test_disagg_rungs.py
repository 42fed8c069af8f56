# 06-disagg's registered rungs one by one from Python: the step models (distserve, roofline, table) on
# one batch, the simulators (colocated, disaggregated) on a request list, the goodput bisection on a
# `ladder simulate` config. Judged against the committed goldens (data/golden/06-disagg) and the
# published coefficients read here from data/, never against the module itself.
import json
import os

import numpy as np
import pytest

import ladder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data")
GOLD = os.path.join(DATA, "golden", "06-disagg")

# The golden step_models grids as request lengths: every row's (n, sum, sum of squares) is matched.
PREFILL = [[1], [97], [512], [1023], [1025], [512, 512, 97, 1025], [2048] * 4, [16384]]
DECODE = [[1], [513], [1025] * 7, [576] * 64, [1023] * 97, [2048] * 255]
# The golden's models (its rows), as step_time arguments.
MODELS = [("distserve", {}), ("roofline", {}), ("roofline", {"model": "deepseek-v3", "gpu": "h800-sxm", "gpus": 8})]


def test_grids_match_the_golden_setup():
    setup = json.load(open(os.path.join(GOLD, "step_models", "case.json")))["setup"]
    for lens, (n, s, sq) in zip(PREFILL, setup["prefill_grid"]):
        assert (len(lens), sum(lens), sum(x * x for x in lens)) == (n, s, sq)
    for lens, (n, s) in zip(DECODE, setup["decode_grid"]):
        assert (len(lens), sum(lens)) == (n, s)


@pytest.mark.parametrize("row", range(len(MODELS)))
def test_step_models_reproduce_the_golden(row):
    rung, params = MODELS[row]
    for phase, grid in (("prefill", PREFILL), ("decode", DECODE)):
        want = np.load(os.path.join(GOLD, "step_models", f"{phase}_ms.npy"))[row]
        got = [ladder.step_time(np.array(lens, dtype=np.int64), phase, rung=rung, **params) for lens in grid]
        assert np.array_equal(np.array(got), want), (rung, params, phase, got, want)


def test_distserve_is_the_published_fit():
    fit = json.load(open(os.path.join(DATA, "disagg", "distserve-opt-13b-a100.json")))
    a, b, c = fit["prefill"]["value"]
    lens = np.array([512, 97], dtype=np.int32)
    assert ladder.step_time(lens, "prefill") == pytest.approx(a + b * 609 + c * (512**2 + 97**2), rel=1e-15)
    a, b, c = fit["decode"]["value"]
    assert ladder.step_time(lens, "decode") == pytest.approx(a + b * 609 + c * 2, rel=1e-15)
    # user coefficients replace the published ones
    assert ladder.step_time(lens, "prefill", prefill=[1, 0, 0]) == 1.0


def test_table_interpolates_the_users_csv():
    csv = os.path.join(DATA, "disagg", "example-step-table.csv")
    rows = [l.split(",") for l in open(csv) if l[0] != "#" and not l.startswith("phase")]
    phase, batch, tokens, ms = rows[0]
    assert int(batch) == 1
    # a batch of one request exactly at a table row takes the row's time
    assert ladder.step_time(np.array([int(float(tokens))]), phase, rung="table", csv=csv) == float(ms)


def test_simulator_rungs_are_the_oracles_event_loop():
    t = np.array([0.0, 5.0, 5.0, 90.0, 91.5])
    i = np.array([512, 97, 1023, 1, 2048])
    o = np.array([64, 1, 113, 2, 7])
    for rung, placement in (("colocated", {"colocated": 2}), ("disaggregated", {"prefill": 2, "decode": 1})):
        setup = {"placement": placement, "kv_transfer": {"link_GBps": 25, "latency_ms": 0.5}}
        got = ladder.run("06-disagg", rung, arrival_ms=t, input_len=i, output_len=o, **setup)
        want = ladder.oracle("06-disagg", arrival_ms=t, input_len=i, output_len=o, **setup)
        assert set(got) == set(want)
        for k in want:
            assert np.array_equal(got[k], want[k]), (rung, k)
        assert ladder.check("06-disagg", {"arrival_ms": t, "input_len": i, "output_len": o}, got["ttft_ms"],
                            output="ttft_ms", **setup)["pass"]
    # the disaggregated rung really migrates: a slower link delays the decode, not the first token (a
    # request with one output token is done at its first token: nothing to migrate)
    slow = ladder.run("06-disagg", "disaggregated", arrival_ms=t, input_len=i, output_len=o,
                      placement={"prefill": 2, "decode": 1}, kv_transfer={"link_GBps": 0.5})
    fast = ladder.run("06-disagg", "disaggregated", arrival_ms=t, input_len=i, output_len=o,
                      placement={"prefill": 2, "decode": 1})
    assert np.array_equal(slow["ttft_ms"], fast["ttft_ms"])
    # Later on the whole, and for the request with the most KV to move; not for every request: a request
    # whose KV lands later can join a smaller batch (a step boundary later) and finish sooner (here the
    # third, 129.8 ms on the slow link vs 133.1 ms on the fast one).
    assert slow["finish_ms"][o > 1].mean() > fast["finish_ms"][o > 1].mean()
    assert slow["finish_ms"][np.argmax(i)] > fast["finish_ms"][np.argmax(i)]
    assert np.array_equal(slow["finish_ms"][o == 1], fast["finish_ms"][o == 1])


def test_goodput_reproduces_the_golden_bisection():
    case = json.load(open(os.path.join(GOLD, "goodput_fig1", "case.json")))["setup"]
    want = np.load(os.path.join(GOLD, "goodput_fig1", "goodput.npy"))
    config = json.load(open(os.path.join(DATA, "disagg", "distserve-fig1.json")))
    config["workload"].update(requests=case["workload"]["requests"], seed=case["workload"]["seed"],
                              rate=case["workload"]["rate"])
    config["goodput"]["precision_rps"] = case["goodput"]["precision_rps"]
    config["step_model"]["file"] = os.path.join(DATA, "disagg", "distserve-opt-13b-a100.json")
    got = ladder.goodput(config)
    assert [g["placement"] for g in got] == [p["name"] for p in case["placements"]]
    cols = ["rate", "per_gpu", "attainment", "upper", "probes"]
    assert np.array_equal(np.array([[g[c] for c in cols] for g in got], dtype=np.float64), want)
    assert ladder.run("06-disagg", "goodput", config=config) == got


def test_bad_arguments_name_the_parameter():
    lens = np.array([512])
    with pytest.raises(ValueError, match="phase: 'both' violates"):
        ladder.step_time(lens, "both")
    with pytest.raises(TypeError, match="lengths: dtype float64; int32 or int64"):
        ladder.step_time(np.array([1.0]), "prefill")
    with pytest.raises(ValueError, match=r"lengths\[0\] = 0 violates 1 <= length"):
        ladder.step_time(np.array([0]), "prefill")
    with pytest.raises(ValueError, match="lengths: shape"):
        ladder.step_time(np.array([], dtype=np.int64), "prefill")
    with pytest.raises(TypeError, match="gpus: not a parameter of the distserve step model"):
        ladder.step_time(lens, "prefill", gpus=2)
    with pytest.raises(ValueError, match="gpu: 'b200' violates a JSON file or a name"):
        ladder.step_time(lens, "prefill", rung="roofline", gpu="b200")
    with pytest.raises(ValueError, match="prefill = \\[1,2\\] violates \\[a, b, c\\]"):
        ladder.step_time(lens, "prefill", prefill=[1, 2])
    with pytest.raises(ValueError, match="csv: the table step model needs csv=PATH"):
        ladder.step_time(lens, "prefill", rung="table")
    t, i, o = np.array([0.0]), np.array([16]), np.array([4])
    with pytest.raises(ValueError, match="rung colocated given placement"):
        ladder.run("06-disagg", "colocated", arrival_ms=t, input_len=i, output_len=o,
                   placement={"prefill": 1, "decode": 1})
    with pytest.raises(ValueError, match="rung disaggregated given placement"):
        ladder.run("06-disagg", "disaggregated", arrival_ms=t, input_len=i, output_len=o)
    with pytest.raises(ValueError, match="backend: 'cuda' violates backend == 'ref'"):
        ladder.run("06-disagg", "colocated", backend="cuda", arrival_ms=t, input_len=i, output_len=o)
    with pytest.raises(ValueError, match="config: 'nope.json': no such file"):
        ladder.goodput("nope.json")
    with pytest.raises(TypeError, match="goodput: takes config="):
        ladder.run("06-disagg", "goodput", arrival_ms=t)


def test_every_06_rung_is_exercised_here():
    """A rung registered later must get a Python call and a test in this file."""
    exercised = {"distserve", "roofline", "table", "colocated", "disaggregated", "goodput"}
    assert {r["id"] for r in ladder.rungs("06-disagg")} == exercised
