"""The figures of `make bench` (scripts/bench-report): each stage program's medians -> records.

A record is one figure: {"stage", "name", "value", "unit", "bound", "ratio", "target", "met"}, ratio =
value / bound, bound measured in the same run. A compute-bound figure (the tiled attention forward, A_CC_ME and
flash_mla, the MoE ragged dot) is reported against the fp32 FMA peak (target 0.75) and against the best peer
timed in the same run at the same shapes (target 0.9): the faster of Eigen's GEMM and oneDNN's f32 matmul
(bench/onednn_peer.hpp; without oneDNN, Eigen alone). Issue 44's target is met when either row is.
"""
import statistics


class AnyCounter(dict):
    """--check-names: a listed benchmark stands in with 1.0 for every counter."""
    def __missing__(self, key):
        return 1.0

    def __contains__(self, key):
        return True


def medians(data):
    """run_name -> {counter or 'real_time_ms': median over repetitions}."""
    if "listed" in data:
        return {n: AnyCounter() for n in data["listed"]}
    by, med = {}, {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":  # programs that report aggregates only (bench_02)
                med[b["run_name"]] = b
            continue
        row = by.setdefault(b["run_name"], {})
        for k, v in b.items():
            if isinstance(v, (int, float)) and k not in ("repetitions", "repetition_index", "threads",
                                                          "family_index", "per_family_instance_index", "iterations"):
                row.setdefault(k, []).append(float(v))
    out = {n: {k: statistics.median(v) for k, v in row.items()} for n, row in by.items()}
    for n, b in med.items():
        out.setdefault(n, {k: float(v) for k, v in b.items() if isinstance(v, (int, float))})
    return out


def record(stage, name, value, unit, bound, target):
    ratio = value / bound if bound else None
    met = None if target is None or ratio is None else ratio >= target
    return {"stage": stage, "name": name, "value": value, "unit": unit, "bound": bound, "ratio": ratio,
            "target": target, "met": met}


def find(m, prefix):
    hits = [v for k, v in m.items() if k.startswith(prefix)]
    if not hits:
        raise KeyError(prefix)
    return hits[0]


def rate(m, prefix, key):
    """m[prefix...][key], or None where the benchmark was skipped (a peer built without oneDNN)."""
    b = find(m, prefix)
    return b[key] if key in b else None


def compute_bound(R, stage, name, value, peak, eigen, onednn):
    """Two records for a compute-bound figure: vs the FMA peak, and vs the faster peer of the same shapes."""
    best = max(v for v in (eigen, onednn) if v is not None)
    peers = "Eigen GEMM" + (", oneDNN f32 matmul" if onednn is not None else "; oneDNN missing")
    R.append(record(stage, f"{name} vs FMA peak", value, "GFLOP/s", peak, 0.75))
    R.append(record(stage, f"{name} vs best peer, same shapes ({peers})", value, "GFLOP/s", best, 0.9))


def records(res):
    R = []
    try:
        stages(res, R)
    except KeyError as e:  # without 00_bounds nothing has a bound
        print(f"bench-report: no results for {e}: no figures reported")
    return R


def stages(res, R):
    b = medians(res["00_bounds"])
    peak = find(b, "BM_fma_peak")["GFLOP/s"]
    copy = find(b, "BM_copy/1")["bytes_per_second"] / 1e9  # buffers advised for huge pages, as the rungs' are
    R.append(record("00", "fp32 FMA peak (all threads)", peak, "GFLOP/s", None, None))
    R.append(record("00", "copy bandwidth (read + write; huge-page-advised buffers: the bound)", copy, "GB/s", None, None))
    R.append(record("00", "copy bandwidth from plain 4 KiB pages vs the bound", find(b, "BM_copy/0")["bytes_per_second"] / 1e9,
                    "GB/s", copy, None))

    if "01_softmax" in res:  # --only may leave a program out
        s = medians(res["01_softmax"])
        t = {k: find(s, f"BM_softmax/{k}/")["real_time"] for k in ("safe", "online", "safe_vec", "online_vec")}
        gbs = {k: find(s, f"BM_softmax/{k}/")["bytes_per_second"] / 1e9 for k in t}
        R.append(record("01", "softmax 64M: online_vec speedup over safe_vec", t["safe_vec"] / t["online_vec"], "x", 1.0, 1.25))
        R.append(record("01", "softmax 64M: online (scalar) speedup over safe (scalar)", t["safe"] / t["online"], "x", 1.0, None))
        R.append(record("01", "softmax 64M: online_vec bytes/s vs copy (floor / time)", gbs["online_vec"], "GB/s", copy, 1 / 1.5))
        R.append(record("01", "softmax 64M: safe_vec bytes/s vs copy", gbs["safe_vec"], "GB/s", copy, None))
        long_rows = {k: find(s, f"BM_softmax_long_rows/{k}/")["real_time"] for k in ("safe_vec", "online_vec")}
        R.append(record("01", "softmax 64M in rows of 16M (past every cache): online_vec speedup over safe_vec",
                        long_rows["safe_vec"] / long_rows["online_vec"], "x", 1.0, None))
        # The same number of rows of 4096 held in the cache, pass by pass (bench/01-softmax/bench.cpp BM_cached_*):
        # the compute each rung's passes cost without memory traffic.
        c = {k: find(s, f"BM_cached_{k}")["real_time"]
             for k in ("max", "exp_sum", "normalise", "online_state", "safe_vec", "online_vec")}
        R.append(record("01", "softmax rows of 4096 in cache: online_vec speedup over safe_vec",
                        c["safe_vec"] / c["online_vec"], "x", 1.0, None))
        R.append(record("01", "softmax rows in cache: safe's max + exp-sum passes / online's one (m, d) pass (time)",
                        (c["max"] + c["exp_sum"]) / c["online_state"], "x", 1.0, None))
        R.append(record("01", "softmax rows in cache: most a free max pass could give online over safe, "
                        "(max + exp_sum + normalise) / (exp_sum + normalise)",
                        (c["max"] + c["exp_sum"] + c["normalise"]) / (c["exp_sum"] + c["normalise"]), "x", 1.0, None))

    if "02_attention" in res:  # --only may leave a program out
        a = medians(res["02_attention"])
        for d in (128, 111, 64, 59):
            tiled, gemm = find(a, f"BM_tiled/{d}")["GFLOP/s"], find(a, f"BM_gemm/{d}")["GFLOP/s"]
            R.append(record("02", f"attention d={d}: tiled vs Eigen GEMM", tiled, "GFLOP/s", gemm, 0.9))
        for d in (128, 59):
            naive, plain = find(a, f"BM_naive/{d}")["GFLOP/s"], find(a, f"BM_eigen_naive/{d}")["GFLOP/s"]
            R.append(record("02", f"attention d={d}: naive rung vs plain Eigen naive", naive, "GFLOP/s", plain, 1 / 1.5))
        for d in (128, 59):  # BM_tiled_eigen: the same rung on Eigen's GEMM and pexp (before issue 44), same run
            if any(k.startswith(f"BM_tiled_eigen/{d}") for k in a):
                R.append(record("02", f"attention d={d}: tiled speedup over its Eigen-product form",
                                find(a, f"BM_tiled/{d}")["GFLOP/s"], "GFLOP/s", find(a, f"BM_tiled_eigen/{d}")["GFLOP/s"], None))
        for d in (128, 111, 64, 59):  # BM_onednn_gemm: the attention's own two products, S = Q K^T and O = S V
            compute_bound(R, "02", f"attention d={d}: tiled", find(a, f"BM_tiled/{d}")["GFLOP/s"], peak,
                          find(a, f"BM_gemm/{d}")["GFLOP/s"], rate(a, f"BM_onednn_gemm/{d}", "GFLOP/s"))

    if "03_mla" in res:  # --only may leave a program out
        m = medians(res["03_mla"])
        lat = find(m, "BM_latent_gemm/32/4096")["flops_per_second"] / 1e9
        # /1: decode_into one Output kept across the steps, as the bound keeps its buffers (bench/03-mla/bench.cpp):
        # the figure with the target; /0: decode, a new Output (fresh pages) every step, shown beside it.
        for rung in ("A_CC_ME", "flash_mla"):
            R.append(record("03", f"MLA B=32 L=4096: {rung} vs latent GEMM (decode_into: buffers reused, like the bound)",
                            find(m, f"BM_rung/{rung}/32/4096/1")["flops_per_second"] / 1e9, "GFLOP/s", lat, 0.7))
            R.append(record("03", f"MLA B=32 L=4096: {rung} vs latent GEMM (decode: a new Output, fresh pages, every step)",
                            find(m, f"BM_rung/{rung}/32/4096/0")["flops_per_second"] / 1e9, "GFLOP/s", lat, None))
        dnnl = rate(m, "BM_latent_onednn/32/4096", "flops_per_second")
        for rung in ("A_CC_ME", "flash_mla"):
            for form, mode in (("decode_into", 1), ("decode", 0)):
                compute_bound(R, "03", f"MLA B=32 L=4096: {rung} ({form})",
                              find(m, f"BM_rung/{rung}/32/4096/{mode}")["flops_per_second"] / 1e9, peak, lat,
                              dnnl / 1e9 if dnnl else None)
        mcopy = find(m, "BM_copy/67108864/1")["bytes_per_second"] / 1e9  # huge-page-advised, as CD's cache
        R.append(record("03", "MLA B=1 L=16384: CD bytes read/s vs copy",
                        find(m, "BM_rung/CD/1/16384/0")["bytes_read_per_second"] / 1e9, "GB/s", mcopy, 0.7))
        # /3: CD's K and V in plain 4 KiB pages, as before prepare_cd advised huge pages (the same run's bound)
        R.append(record("03", "MLA B=1 L=16384: CD with K, V on 4 KiB pages (as before) vs copy",
                        find(m, "BM_rung/CD/1/16384/3")["bytes_read_per_second"] / 1e9, "GB/s", mcopy, None))

    if "04_moe" in res:  # --only may leave a program out
        e = medians(res["04_moe"])
        dense = find(e, "BM_dense_gemm")["GFLOP/s"]
        for k, label in (("BM_ragged/0", "balanced"), ("BM_ragged/12", "Zipf 1.2")):
            R.append(record("04", f"MoE ragged dot ({label}) vs one dense GEMM", find(e, k)["GFLOP/s"], "GFLOP/s", dense, None))
        dnnl = rate(e, "BM_onednn_sgemm", "GFLOP/s")  # the stronger peer (None: skipped, built without oneDNN)
        for k, label in (("BM_ragged/0", "balanced"), ("BM_ragged/12", "Zipf 1.2")):
            compute_bound(R, "04", f"MoE ragged dot ({label})", find(e, k)["GFLOP/s"], peak, dense, dnnl)
        for name, v in (("MoE ragged dot (balanced)", find(e, "BM_ragged/0")["GFLOP/s"]), ("Eigen dense GEMM", dense)):
            R.append(record("04", f"{name} vs oneDNN sgemm, same shape" + ("" if dnnl else " (oneDNN missing)"),
                            v, "GFLOP/s", dnnl, None))

    if "06_disagg" in res:  # --only may leave a program out
        g = medians(res["06_disagg"])
        for k, v in sorted(g.items()):
            if "requests_per_s" in v:
                R.append(record("06", f"simulator {k}", v["requests_per_s"] / 1e6, "M requests/s", None, None))

    if "07_precision" in res:  # --only may leave a program out
        precision(res, R)


def precision(res, R):
    """Stage 07: ladder's int8 / bf16 CPU GEMMs vs oneDNN's s8s8s32 / bf16 matmul, same run (no peer: no ratio)."""
    p = medians(res["07_precision"])
    for s, shape in enumerate(("512x7168x2048 (expert up)", "512x2048x7168 (expert down)", "4096^3")):
        for t, peer_name in (("int8", "s8s8s32"), ("bf16", "bf16")):
            peer = find(p, f"BM_{t}/{s}/1/")
            peer = peer["GOP/s"] if "GOP/s" in peer else None  # skipped: built without oneDNN
            R.append(record("07", f"{t} GEMM {shape}: ladder vs oneDNN {peer_name} matmul"
                            + ("" if peer else " (oneDNN missing)"), find(p, f"BM_{t}/{s}/0/")["GOP/s"], "GOP/s", peer, 0.8))
            if t == "bf16" and "07_precision_noamx" in res:  # oneDNN ran AMX-BF16 above (scripts/bench-report)
                q = medians(res["07_precision_noamx"])
                R.append(record("07", f"bf16 GEMM {shape}: ladder vs oneDNN bf16 matmul held to AVX512_BF16",
                                find(q, f"BM_bf16/{s}/0/")["GOP/s"], "GOP/s", find(q, f"BM_bf16/{s}/1/")["GOP/s"], 0.8))
            avx2 = next((v for k, v in p.items() if k.startswith(f"BM_{t}/{s}/2/") and "GOP/s" in v), None)
            if avx2:  # the AVX2 path forced, as on a CPU without AVX-512 or VNNI (no target; no AVX2: skipped)
                R.append(record("07", f"{t} GEMM {shape}: AVX2 path vs oneDNN", avx2["GOP/s"], "GOP/s", peer, None))
