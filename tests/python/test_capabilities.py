import torch

import smla


def test_why_not():
    assert smla.why_not("sparse_decode", backend="cpu", format="fp8_ds_mla", d_qk=576, h_q=16) is None
    msg = smla.why_not("sparse_decode", backend="cuda_sm90", format="fp8_ds_mla", s_q=8)
    if smla.built_with_cuda():
        assert msg == "s_q must be between 1 and 4 for cuda_sm90 sparse_decode, got 8"
    else:
        assert msg is not None and "s_q must be between 1 and 4" in msg
    assert "cuda" in smla.why_not("dense_decode", backend="cuda", format="bf16", h_q=256)
    msg = smla.why_not("dense_decode", format="bf16", q_dtype=torch.float16)
    assert msg is not None and "q_dtype" in msg and "float16" in msg
    msg = smla.why_not("sparse_decode", format="fp8_model1", d_qk=576)
    assert msg is not None and msg.startswith("d_qk must be")
    assert smla.why_not("dense_decode", format="fp8_e4m3", q_dtype=torch.float8_e4m3fn, h_q=8, h_kv=2) is None


def test_capabilities_table():
    rows = smla.capabilities()
    ops = {(r["op"], r["backend"]) for r in rows}
    for op in ("sparse_decode", "sparse_prefill", "dense_decode", "merge_states", "write_cache", "gather_cache"):
        assert (op, "cpu") in ops and (op, "cuda_sm90") in ops
    keys = {"op", "backend", "architectures", "q_dtypes", "formats", "d_qk", "h_q", "page_sizes", "topk", "s_q"}
    assert all(set(r) == keys for r in rows)
    assert isinstance(smla.built_with_cuda(), bool) and isinstance(smla.cuda_device_available(), bool)


def test_import_smla_first_in_a_fresh_interpreter():
    # An engine may import smla before torch; that must load as well as the other order.
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", "import smla, torch; print(smla.built_with_cuda())"],
                          capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
