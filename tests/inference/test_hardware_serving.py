"""The devices people serve on (issue 17, item 2): presets in costgraph/hardware.toml.

Each figure below is the vendor's, read from the datasheet its `# source:` comment names
(dense peaks, never the 2:4 sparse figure; GB = 10^9 B as printed; link bandwidth per
direction; rack and board totals divided per device). The traps of /work/shared/TRAINING.md
§6 are pinned: L4's 242 is sparse (121 dense); RTX 4090's 330.3 is FP16-accumulate (165.2
with FP32 accumulate, what PyTorch runs); H800's NVLink 400 GB/s is bidirectional (200 per
direction); GB300's 576 TB/s is 72 GPUs' HBM (8 TB/s each).
"""

import pytest

from costgraph.cli import main
from costgraph.hardware import preset, presets

TERA = 10**12
GB = 10**9
GIB = 2**30
SERVING = ("l4", "l40s", "a10g", "rtx-4090", "rtx-5090", "rtx-pro-6000-blackwell", "h20", "h800", "b300",
           "gb300", "mi250x", "mi355x", "tpu-v7", "trainium2", "m3-max", "m4-max", "m3-ultra")


def test_every_serving_preset_loads_with_a_source_per_number():
    table = presets()
    for key in SERVING:
        hw = table[key]
        assert hw.key == key and hw.name and hw.vendor
        for k in hw.numbers():
            assert hw.source(k), (key, k)
        assert hw.peak_flops("bf16") > 0


@pytest.mark.parametrize("key, bf16, memory, bandwidth", [
    ("l4", 121 * TERA, 24 * GB, 300 * GB),                       # L4 datasheet: BF16 242* sparse, 24GB, 300GB/s
    ("l40s", 362_050 * 10**9, 48 * GB, 864 * GB),                # L40S datasheet: BF16 362.05 | 733*
    ("rtx-4090", 165_200 * 10**9, 24 * GB, 1_008 * GB),          # Ada whitepaper App. A: BF16 w/ FP32 acc 165.2
    ("rtx-5090", 209_500 * 10**9, 32 * GB, 1_792 * GB),
    ("h20", 148 * TERA, 96 * GB, 4_000 * GB),
    ("h800", 989_400 * 10**9, 80 * GB, 3_350 * GB),              # H100 SXM compute, H800 datasheet
    ("b300", 2_250 * TERA, 288 * GB, 8_000 * GB),                # HGX B300: 36 PF sparse / 8 / 2
    ("gb300", 2_500 * TERA, 279 * GB, 8_000 * GB),               # GB300 NVL72: 360 PF sparse / 72 / 2; 576 TB/s / 72
    ("mi250x", 383 * TERA, 128 * GB, 3_276_800 * 10**6),         # MI250X data sheet
    ("mi355x", 2_516_600 * 10**9, 288 * GB, 8_000 * GB),
    ("tpu-v7", 2_307 * TERA, 192 * GIB, 7_370 * GB),             # Cloud TPU7x docs: 2307 TFLOPs, 192 GiB
    ("trainium2", 667 * TERA, 96 * GIB, 2_900 * GB),             # Neuron docs: 667 BF16 TFLOPS, 96 GiB
    ("m3-max", 14_315_520 * 10**6, 128 * GB, 400 * GB),          # Apple: 128GB, 400GB/s; peak an estimate
    ("m4-max", 17_182_720 * 10**6, 128 * GB, 546 * GB),
    ("m3-ultra", 28_631_040 * 10**6, 512 * GB, 819 * GB),
])
def test_datasheet_figures(key, bf16, memory, bandwidth):
    hw = preset(key)
    assert (hw.peak_flops_bf16, hw.memory_bytes, hw.memory_bandwidth) == (bf16, memory, bandwidth)


def test_the_traps_are_avoided():
    assert preset("l4").peak_flops_fp8 == 242_500 * 10**9          # 485* sparse halved
    assert preset("rtx-4090").peak_flops_fp16 == 165_200 * 10**9    # not 330.3 (FP16 accumulate)
    assert "fp32 accumulate" in preset("rtx-4090").source("peak_flops_bf16").lower()
    assert preset("h800").scale_up_bandwidth == 200 * GB            # NVLink 400 GB/s bidirectional, halved
    assert preset("h20").scale_up_bandwidth == 450 * GB             # NVLink 900 GB/s bidirectional, halved
    assert preset("gb300").scale_up_domain == 72 and preset("gb300").scale_up_bandwidth == 900 * GB
    assert preset("tpu-v7").scale_up_bandwidth == 600 * GB          # ICI 1.2 TBps bidirectional, halved
    assert preset("trainium2").peak_flops_fp8 == 1_299 * TERA
    assert preset("mi250x").peak_flops_fp8 == 0 and preset("a10g").peak_flops_fp8 == 0   # no FP8 before Ada/CDNA3
    assert "workstation edition" in preset("rtx-pro-6000-blackwell").name.lower()


def test_apple_unified_memory_no_link_estimated_peaks():
    for key in ("m3-max", "m4-max", "m3-ultra"):
        hw = preset(key)
        assert hw.scale_up_domain == 1 and hw.scale_up_bandwidth == 0 and hw.devices_per_node == 1
        assert "estimate" in hw.note and "unified memory" in hw.note
        for d in ("bf16", "fp16", "fp32"):
            assert "estimate" in hw.source(f"peak_flops_{d}"), (key, d)


def test_costgraph_hardware_lists_them(capsys):
    assert main(["hardware"]) == 0
    out = capsys.readouterr().out
    for key in SERVING:
        assert f"\n{key} " in out, key
    assert main(["hardware", "m3-ultra"]) == 0
    assert "estimate" in capsys.readouterr().out


def test_infer_on_a_serving_preset(capsys):
    # Llama-2-7B bf16 on an L4: the decode step is memory-bound, so it takes its bytes / 300 GB/s
    from costgraph.inference import infer, load

    m = load("llama")
    rep = infer(m, hardware="l4", prompt=512, generate=128, batch=1, values=m.values("llama-2-7b"))
    bare = infer(m, bandwidth=300 * GB, prompt=512, generate=128, batch=1, values=m.values("llama-2-7b"))
    assert rep.values["decode.seconds"] == bare.values["decode.seconds_at_least"]
    assert rep.values["fits"] is True


def test_tp_all_reduce_across_nodes_takes_its_members_nics():
    # a TP group past one node is NCCL's ring (vLLM's custom all-reduce is single-node: custom_all_reduce.py
    # refuses a group across nodes); NCCL's ring channels take the NICs of the members on each node
    # (NVIDIA/nccl @ 5067397 src/graph/search.cc, tuning.cc nChannels·bwInter; nccl#307: "~12 GB/s with
    # each NIC, then ~24 when using 2 NICs"): TP 16 on 8-GPU H100 nodes, 8 members a node,
    # min(8 · 50, 450) = 400 GB/s at the line rates serving keeps; TP 8 stays on NVLink (unchanged)
    from costgraph.inference.device import figures
    from costgraph.parallel.placement import link

    assert figures("h100-sxm", "bf16", 16).beta == 400 * GB
    assert figures("h100-sxm", "bf16", 8).beta == 450 * GB
    assert figures("gb300", "bf16", 128).beta == 900 * GB     # 64 members a domain: capped by NVLink
    assert figures("h100-pcie", "bf16", 16).beta == 100 * GB  # NVLink-bridged pairs: min(2 · 50, 300)
    # the serving path (inference.parallel) asks placement.link the same with ring=True, rate="line"
    assert link(1, 16, preset("h100-sxm"), 16, ring=True, rate="line")[1] == 400 * GB
