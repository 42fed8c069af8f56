# 06-disagg through the case contract from Python: a request list made with numpy -> per-request times
# from the simulator; the oracle's own times pass, one ulp off fails, nested params (the setup) travel as
# JSON, a bad key is a ValueError naming it.
import numpy as np
import pytest

import ladder

T = np.array([0.0, 10.0, 20.0, 400.0])
IN = np.array([512, 97, 1023, 1])
OUT = np.array([64, 1, 113, 2], dtype=np.int32)
SETUP = {"placement": {"colocated": 1}, "workers": {"chunked_prefill_tokens": 256}}


def test_oracle_and_exact_check():
    inputs = {"arrival_ms": T, "input_len": IN, "output_len": OUT}
    out = ladder.oracle("06-disagg", **inputs, **SETUP)
    assert out["ttft_ms"].dtype == np.float64 and out["ttft_ms"].shape == (4,) and (out["ttft_ms"] > 0).all()
    assert out["tpot_ms"][1] == 0  # one output token: no time per output token
    for name in ("ttft_ms", "tpot_ms", "finish_ms", "slo_met"):
        assert ladder.check("06-disagg", inputs, out[name], output=name, **SETUP)["pass"], name
    bad = out["ttft_ms"].copy()
    bad[2] = np.nextafter(bad[2], np.inf)
    r = ladder.check("06-disagg", inputs, bad, output="ttft_ms", **SETUP)
    assert not r["pass"] and r["rule"] == "exact"
    unchunked = ladder.oracle("06-disagg", **inputs)
    assert not np.array_equal(unchunked["ttft_ms"], out["ttft_ms"])


def test_golden_case_and_bad_params():
    g = ladder.golden("06-disagg", "requests_chunked")
    assert ladder.check("06-disagg", g, g["outputs"]["tpot_ms"], output="tpot_ms")["pass"]
    with pytest.raises(ValueError, match="chunked_prefill_tokens = 0 violates >= 1"):
        ladder.oracle("06-disagg", arrival_ms=T, input_len=IN, output_len=OUT, workers={"chunked_prefill_tokens": 0})
