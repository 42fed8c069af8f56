"""ladder: reference rungs, the fp64 oracle and the tolerance rule for LLM-inference kernels.

    import ladder
    ladder.rungs("01-softmax")                    # the registry: stage, id, backend, doc, cost
    y = ladder.softmax(x)                         # a rung on numpy arrays (float32 or float64)
    o = ladder.attention(Q, K, V, causal=True)    # {"O", "L", "m"}
    r = ladder.moe("dropless", **case["inputs"], **case["params"])   # 03-mla / 04-moe: a whole case's inputs
    ms = ladder.step_time(np.array([512, 97]), "prefill", rung="roofline")   # 06: one step's ms
    r = ladder.run("06-disagg", "disaggregated", arrival_ms=t, input_len=i, output_len=o,
                   placement={"prefill": 2, "decode": 1})           # 06: per-request TTFT, TPOT, ...
    ladder.goodput("data/disagg/distserve-fig1.json")               # 06: goodput per placement
    ladder.describe("02-attention")              # the case contract: inputs, params, outputs, rules
    want = ladder.oracle("01-softmax", x=x)       # fp64 expected outputs of YOUR inputs, {"y": ...}
    ladder.check("01-softmax", {"x": x}, y)      # the tolerance rule's report as a dict ("pass", ...)
    case = ladder.golden("01-softmax", "len_97")  # {"inputs", "params", "outputs", "arrays", "manifest"}

Every rung runs through its stage's contract (Contract::run_rung; one copy in, one out) on C-contiguous
float32/float64 arrays, at the precision of its float inputs (float64 data is not rounded to float32). Bad arguments raise TypeError (type, dtype) or ValueError (shape, layout, empty,
NaN where the stage forbids it, a violated parameter constraint), each naming the argument.
"""
import json
import os
import tempfile

import numpy as np

from . import _ladder

__all__ = ["rungs", "stages", "cost", "run", "softmax", "attention", "attention_backward", "eplb", "mla", "moe",
           "step_time", "goodput", "describe", "oracle", "check", "golden", "version", "flashmla_check",
           "flashmla_sparse_prefill_check",
           "deepgemm_check", "deepep_check"]

version = _ladder.version


def stages():
    """The registered stages, in ladder order ("01-softmax", ...)."""
    return list(_ladder.stages())


def rungs(stage=None, backend=None):
    """Every registered rung as a dict {stage, id, backend, name, doc, cost_doc}, optionally filtered."""
    return [r for r in _ladder.rungs()
            if (stage is None or r["stage"] == stage) and (backend is None or r["backend"] == backend)]


def cost(stage, rung, shape, backend="ref"):
    """The rung's cost for a shape (the shape its stage documents, e.g. [rows, cols] for softmax)."""
    return _ladder.cost(stage, backend, rung, [int(s) for s in shape])


def _precision_of(name, a):
    """float32 / float64 from a float array's dtype (the precision the rung runs at); anything else raises."""
    if not isinstance(a, np.ndarray):
        return "float32"  # the conversion names what it got (a list, a numpy scalar, ...)
    if a.dtype == np.float32:
        return "float32"
    if a.dtype == np.float64:
        return "float64"
    raise TypeError(f"{name}: dtype {a.dtype}; float32 or float64 required")


def softmax(x, rung="online", backend="ref"):
    """Stage 01: softmax over the last axis of x [..., cols]; float32 x runs the rung's float32 function,
    float64 x its float64 one (on x as given). Sugar over run("01-softmax", rung, x=x)."""
    precision = _precision_of("x", x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        raise ValueError("x: a 0-d array, violates rank >= 1 ([..., cols], softmax over the last axis)")
    return _run_contract("01-softmax", rung, backend, precision, {"x": x})["y"]


def attention(Q, K, V, rung="tiled", backend="ref", causal=False, scale=None):
    """Stage 02 forward: Q [B, H, Nq, d], K, V [B, H_kv, Nk, d] -> {"O": [B, H, Nq, d], "L", "m": [B, H, Nq]}.

    scale defaults to 1/sqrt(d); causal masks align bottom-right (query i sees key j iff j <= i + Nk - Nq).
    The precision is Q's dtype. Sugar over run("02-attention", rung, Q=Q, K=K, V=V, causal=..., scale=...)."""
    if rung.startswith("backward"):
        raise ValueError(f"rung: '{rung}' is a backward rung; call attention_backward (or run) for it")
    kw = {"Q": Q, "K": K, "V": V, "causal": bool(causal)}
    if scale is not None:
        if not np.isfinite(scale):
            raise ValueError(f"scale: {scale} violates scale finite")
        kw["scale"] = float(scale)
    return _run_contract("02-attention", rung, backend, _precision_of("Q", Q), kw)


def attention_backward(Q, K, V, O, dO, L, rung="backward_recompute", backend="ref", causal=False, scale=None):
    """Stage 02 backward: Q, K, V, O, dO, L -> {"dQ", "dK", "dV", "D"} (names as in the stage's contract).

    A typed call of its own, not the contract's run: FlashAttention-2's backward takes the caller's saved O and
    L, where the contract's run recomputes them from Q, K, V (run("02-attention", "backward_...", dO=...))."""
    return _ladder.attention_backward(backend, rung, Q, K, V, O, dO, L, bool(causal), scale)


def eplb(weight, rung="hierarchical", num_replicas=0, num_groups=1, num_nodes=1, num_gpus=1, num_packs=1):
    """Stage 05: weight [L, n] (expert loads) -> the rung's int64 maps by name (phy2log, log2phy, ...).
    Sugar over run("05-eplb", rung, weight=..., num_replicas=..., ...)."""
    kw = {"weight": weight, "num_replicas": int(num_replicas), "num_groups": int(num_groups),
          "num_nodes": int(num_nodes), "num_gpus": int(num_gpus)}
    if rung == "balanced_packing":
        kw["num_packs"] = int(num_packs)
    return _run_contract("05-eplb", rung, "ref", "float64", kw)


def _run_contract(stage, rung, backend, precision, kwargs):
    """Any rung through the stage's contract (Contract::run_rung); the C++ side checks the precision."""
    inputs, params = _split(stage, kwargs)
    return _ladder.run(stage, backend, rung, inputs, params, precision)


def mla(rung="flash_mla", backend="ref", precision="float32", **inputs_and_params):
    """Stage 03: one MLA decode step on a paged cache, inputs and params named as in
    describe("03-mla") (W_DQ, ..., h, q_pos, seqlens, block_table, blocks; float32 arrays, int32/int64
    indices) -> {"u": [B, hidden], "lse": [B, H], and "scores" for the rungs that form them}.
    precision="float64" runs the rung's float64 function on the same inputs (reference rungs only)."""
    return _run_contract("03-mla", rung, backend, precision, inputs_and_params)


def moe(rung="dropless", backend="ref", precision="float32", **inputs_and_params):
    """Stage 04: one MoE layer, inputs and params named as in describe("04-moe") (x, bias, W_gate, w1,
    w3, w2, s1, s3, s2; top_k, n_group, ...) -> {"y", "topk_idx", "topk_weight", and "group_sizes",
    "sort_idx", "kept" where the rung computes them}; rung="gate" returns the routing only. Layer rungs
    route with the reference gate at their precision (the CUDA gate is the cuda rung "gate")."""
    return _run_contract("04-moe", rung, backend, precision, inputs_and_params)


def step_time(lengths, phase="prefill", rung="distserve", **params):
    """Stage 06 step models: the time (ms) of ONE engine step whose batch holds a request per entry of
    `lengths` (int array; prefill: each request's new tokens; decode: each request's context).

    rung="distserve": prefill=[a, b, c], decode=[a, b, c] (ms; default DistServe's OPT-13B A100 fit);
    rung="roofline": model="opt-13b" | "deepseek-v3" | PATH.json, gpu="a100-80gb" | "h800-sxm" | PATH.json,
    gpus=1, dtype="bf16" (names are files in ladder's data/models, data/gpus; $LADDER_DATA overrides);
    rung="table": csv=PATH (header phase,batch,tokens,ms)."""
    return _ladder.step_time(rung, phase, lengths, json.dumps({k: _plain(k, v) for k, v in params.items()}))


def goodput(config):
    """Stage 06 goodput rung on a `ladder simulate` config (a dict, or a path to its JSON): per placement
    {"placement", "gpus", "rate", "per_gpu", "attainment", "upper", "probes"} -- the highest rate measured
    to keep >= the target attainment, found by doubling then bisection to the config's precision."""
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if not os.path.isfile(path):
            raise ValueError(f"config: '{path}': no such file")
        with open(path) as f:
            text, base = f.read(), os.path.dirname(os.path.abspath(path))
    elif isinstance(config, dict):
        text, base = json.dumps(_plain("config", config)), os.getcwd()
    else:
        raise TypeError(f"config: expected a dict or a path to a config JSON, got {type(config).__name__}")
    return list(_ladder.goodput(text, base))


def _disagg(backend, rung, kw):
    """06-disagg by rung kind: simulators take a request list, step models a batch, goodput a config."""
    if backend != "ref":
        raise ValueError(f"backend: '{backend}' violates backend == 'ref' (06-disagg is a simulator; no kernels)")
    if rung in ("distserve", "roofline", "table"):
        return step_time(rung=rung, **kw)
    if rung == "goodput":
        if set(kw) != {"config"}:
            raise TypeError("goodput: takes config= (a dict or a path), got " + (", ".join(kw) or "nothing"))
        return goodput(kw["config"])
    return _run_contract("06-disagg", rung, backend, "float64", kw)


def run(stage, rung, backend="ref", **inputs):
    """Any registered rung by stage and id through its case contract (Contract::run_rung): inputs and params
    named as in describe(stage), precision="float32" | "float64" (default: float64 when the first float input
    is float64, else float32), outputs by name. 06-disagg's step models and goodput take their own arguments
    (step_time, goodput). The per-stage functions above are sugar over this."""
    if backend == "cuda" and stage == "05-eplb":
        raise ValueError("backend: 05-eplb's CUDA rungs are the data plane (load counting, replica mapping), "
                         "not registered rungs; use backend='ref'")
    if stage == "06-disagg":
        return _disagg(backend, rung, inputs)
    if stage not in stages():
        raise ValueError(f"stage: '{stage}' is not a stage (stages: {', '.join(stages())})")
    precision = inputs.pop("precision", None)
    if precision is None:
        floats = [v.dtype for v in inputs.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
        precision = "float64" if floats and floats[0] == np.float64 else "float32"
    return _run_contract(stage, rung, backend, precision, inputs)


def describe(stage):
    """The stage's case contract: inputs, params and outputs (name, dtype, shape, doc), each output's rule
    (max_abs | elementwise | exact | bound), k and why, the oracle and baseline, and the readable text."""
    return _ladder.describe(stage)


def _plain(name, v):
    """A parameter as JSON: bool, int, float, str, or a list / dict of them (06-disagg's setup is nested)."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(f"{name}[{i}]", x) for i, x in enumerate(v)]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {k: _plain(f"{name}.{k}", x) for k, x in v.items()}
    raise TypeError(f"{name}: a parameter must be a bool, int, float, str, or a list / dict (str keys) of them, "
                    f"got {type(v).__name__}")


def _split(stage, kwargs):
    """Keyword arguments -> (input arrays, params JSON) by the stage's contract; unknown names rejected."""
    spec = describe(stage)
    input_names = [t["name"] for t in spec["inputs"]]
    param_names = [p["name"] for p in spec["params"]]
    inputs, params = {}, {}
    for k, v in kwargs.items():
        if k in input_names:
            inputs[k] = v
        elif k in param_names:
            params[k] = _plain(k, v)
        else:
            raise TypeError(f"{k}: not an input or parameter of {stage} (inputs: {', '.join(input_names)}; "
                            f"params: {', '.join(param_names) or 'none'})")
    return inputs, json.dumps(params)


def oracle(stage, **inputs_and_params):
    """The fp64 expected outputs of YOUR inputs: oracle("01-softmax", x=x) -> {"y": float64 array}.

    Inputs and parameters are keyword arguments named as in describe(stage); they are validated
    against the contract (a wrong name, dtype, shape or NaN where forbidden raises, naming it)."""
    inputs, params = _split(stage, inputs_and_params)
    return _ladder.oracle(stage, inputs, params)


def check(stage, case_or_inputs, candidate, output=None, rule=None, ftz=None, companions=None, device=False,
          **params):
    """Judges a candidate output by the stage's tolerance rule; returns the report as a dict
    {"pass", "output", "rule", "failed", "metrics", "text"}.

    case_or_inputs: a case folder (path with case.json, from `ladder golden` or `ladder oracle`), a
    golden(...) dict, or a dict of input arrays (the expected outputs then come from the fp64 oracle;
    parameters as keyword arguments). output: which output the candidate is (default: the first).
    ftz=True: flush-to-zero, a subnormal expected value matched by 0 counts as equal (a GPU's fast-math);
    None (the default): on for a device candidate, off otherwise.
    device=True: the candidate came from a GPU: the device math library's documented error is allowed where
    the contract derives it (describe(stage)), and FTZ is on unless ftz=False; the report says so (`--device`).
    companions: the candidate's other outputs by name, for a rule that judges them together, as the CLI reads
    NAME.npy beside the candidate (05-eplb's rule="valid": {"logcnt": ..., "log2phy": ...}).
    """
    if isinstance(case_or_inputs, (str, os.PathLike)):
        case = _ladder.read_case(stage, os.fspath(case_or_inputs))
        inputs, params_json, expected = case["inputs"], case["params_json"], case["expected"]
        if params:
            raise TypeError(f"{', '.join(params)}: parameters come from the case folder's case.json")
    elif isinstance(case_or_inputs, dict) and "manifest" in case_or_inputs and "outputs" in case_or_inputs:
        inputs, expected = case_or_inputs["inputs"], case_or_inputs["outputs"]
        params_json = json.dumps(case_or_inputs.get("params", {}))
    elif isinstance(case_or_inputs, dict):
        inputs, params_json = _split(stage, dict(case_or_inputs, **params))
        expected = _ladder.oracle(stage, inputs, params_json)
    else:
        raise TypeError("case_or_inputs: expected a case folder path, a golden() dict or a dict of input arrays, "
                        f"got {type(case_or_inputs).__name__}")
    if companions is not None and not isinstance(companions, dict):
        raise TypeError(f"companions: expected a dict of arrays by output name, got {type(companions).__name__}")
    return _ladder.check(stage, inputs, params_json, expected, output or "", candidate, rule or "",
                         None if ftz is None else bool(ftz), companions or {}, bool(device))


def golden(stage, case=None):
    """A golden case computed by ladder's fp64 reference (the same bytes as data/golden/, written whole).

    golden(stage) -> the case names; golden(stage, case) -> {"stage", "case", "manifest" (case.json as a
    dict), "arrays" (every .npy by file stem), and by the stage's contract "inputs", "params",
    "outputs" (the expected arrays), ready for check(stage, golden(...), candidate)}.
    """
    if case is None:
        return list(_ladder.golden_cases(stage))
    if not isinstance(case, str):
        raise TypeError(f"case: expected a case name (str), got {type(case).__name__}")
    with tempfile.TemporaryDirectory(prefix="ladder-golden-") as tmp:
        _ladder.golden_write(stage, case, tmp)
        with open(os.path.join(tmp, "case.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        arrays = {}
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".npy"):
                arrays[name[:-4]] = np.load(os.path.join(tmp, name), allow_pickle=False)
        result = {"stage": stage, "case": case, "manifest": manifest, "arrays": arrays}
        if stage in _ladder.contract_stages():
            folder = _ladder.read_case(stage, tmp)
            result.update(inputs=folder["inputs"], outputs=folder["expected"],
                          params=json.loads(folder["params_json"]))
    return result


FLASHMLA = "03-mla/flashmla"


def flashmla_check(case_or_inputs, o, lse, **params):
    """Judges a FlashMLA decode candidate in FlashMLA's own layouts (ladder/03-mla/flashmla.hpp): o [b, s_q, h_q, dv]
    and lse [b, h_q, s_q] (natural log) as numpy arrays, against a case folder (`ladder flashmla write`) or a dict
    of the inputs q [b, s_q, h_q, d], kcache [num_blocks, 64, 1, d] float32 or uint8 [num_blocks, 64, 1, 656] (FP8
    with scale records), block_table, cache_seqlens, or indices [b, s_q, topk] for sparse decode (params: causal,
    head_dim_v, softmax_scale). Returns {"pass", "o": report, "lse": report}; each report's metrics hold
    FlashMLA's cos_diff ("flashmla_cos_diff") beside the verdict. The same rule as
    `ladder check 03-mla/flashmla CASE FOLDER --output o,lse`."""
    ro = check(FLASHMLA, case_or_inputs, o, output="o", **params)
    rl = check(FLASHMLA, case_or_inputs, lse, output="lse", **params)
    return {"pass": bool(ro["pass"] and rl["pass"]), "o": ro, "lse": rl}


FLASHMLA_SPARSE_PREFILL = "03-mla/flashmla_sparse_prefill"


def flashmla_sparse_prefill_check(case_or_inputs, out, max_logits, lse, **params):
    """Judges a FlashMLA sparse prefill candidate (flash_mla_sparse_fwd): out [s_q, h_q, d_v], max_logits and lse
    [s_q, h_q] in BASE 2 (log2 of the sum of e^{scaled score}) as numpy arrays, against a case folder (`ladder
    flashmla prefill-write`) or a dict of the inputs q [s_q, h_q, d_qk], kv [s_kv, 1, d_qk], indices [s_q, 1, topk]
    (params: sm_scale, d_v). Returns {"pass", "out", "max_logits", "lse"}; the same rule as
    `ladder check 03-mla/flashmla_sparse_prefill CASE FOLDER --output out,max_logits,lse`."""
    r = {name: check(FLASHMLA_SPARSE_PREFILL, case_or_inputs, cand, output=name, **params)
         for name, cand in (("out", out), ("max_logits", max_logits), ("lse", lse))}
    return {"pass": all(v["pass"] for v in r.values()), **r}


DEEPGEMM = {name: f"04-moe/deepgemm_{name}"
            for name in ("contiguous", "masked", "contiguous_fp8", "masked_fp8", "k_grouped", "k_grouped_fp8")}


def deepgemm_check(layout, case_or_inputs, d, **params):
    """Judges a DeepGEMM grouped-GEMM candidate in DeepGEMM's own layouts (ladder/04-moe/deepgemm.hpp): layout
    "contiguous" (a [m_sum, k], b [num_groups, n, k], m_indices [m_sum] with -1 on padding rows; params block_m,
    padding_rows "zero" | "unjudged") or "masked" (a [num_groups, max_m, k], b, masked_m [num_groups]; rows past
    masked_m not judged), or "contiguous_fp8" / "masked_fp8" (E4M3 values with scales sa, sb; judged by stage 07's
    derived FP8 bound), or "k_grouped" (the weight gradient: a [sum(ks), m], b [sum(ks), n], ks, optional c;
    d [num_groups, m, n] = c[g] + a[K_g]^T b[K_g]), or "k_grouped_fp8" (the same with E4M3 a, b and per-channel scales
    sa [sum(ks)/128, align4(m)], sb [sum(ks)/128, align4(n)] per 128 rows of K; judged by stage 07's derived FP8
    bound plus the float32 addition of c); d the output as a numpy array, against a case folder (`ladder deepgemm write`) or a dict of
    the inputs. Returns the report dict; its metrics hold DeepGEMM's calc_diff ("deepgemm_calc_diff") beside the
    verdict and "not_judged" (elements the layout leaves unspecified). The same rule as
    `ladder check 04-moe/deepgemm_LAYOUT CASE DIR`."""
    if layout not in DEEPGEMM:
        raise ValueError(f"layout: {layout!r} is not one of {', '.join(DEEPGEMM)}")
    return check(DEEPGEMM[layout], case_or_inputs, d, output="d", **params)


DEEPEP = {"normal": "04-moe/deepep_normal", "low_latency": "04-moe/deepep_low_latency"}


def deepep_check(mode, case_or_inputs, outputs, **params):
    """Judges a DeepEP dispatch / combine candidate in DeepEP's own layouts (ladder/04-moe/deepep.hpp): mode "normal"
    (get_dispatch_layout's counts and mask, the received buffers, combine) or "low_latency" (recv_count, the packed
    FP8 receive buffer and its scales, the weighted combine); outputs a dict of numpy arrays by output name, every
    output of describe("04-moe/deepep_MODE") including recv_src (each received row's source rank * num_tokens +
    token, -1 past the count), by which the received rows are matched (DeepEP leaves their order unspecified);
    against a case folder (`ladder deepep write`) or a dict of the inputs (params num_ranks, num_experts, ...).
    Returns {"pass", NAME: report, ...}; the same rule as `ladder check 04-moe/deepep_MODE CASE DIR --output ...`."""
    if mode not in DEEPEP:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(DEEPEP)}")
    if not isinstance(outputs, dict):
        raise TypeError(f"outputs: expected a dict of arrays by output name, got {type(outputs).__name__}")
    names = [o["name"] for o in describe(DEEPEP[mode])["outputs"]]
    missing = [n for n in names if n not in outputs]
    if missing:
        raise ValueError(f"outputs: {', '.join(missing)} missing (every output of {DEEPEP[mode]} is judged)")
    r = {n: check(DEEPEP[mode], case_or_inputs, outputs[n], output=n, companions=outputs, **params) for n in names}
    return {"pass": all(v["pass"] for v in r.values()), **r}
