"""runtime_memory.toml and costgraph.runtime_memory: the memory a process holds besides the model's tensors
(issue 29 item 3: vLLM's non-torch memory; issue 27: training's reserve as named parts)."""

from __future__ import annotations

import pytest

from costgraph import runtime_memory as rm
from costgraph.hardware import preset
from tests.device_memory import H100_SXM_CUDA

GIB = 2**30
# NVIDIA/nccl src/init.cc: DEFAULT_BUFFSIZE (1 << 22); DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD 8 x
# NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x sizeof(ncclLLFifoLine) 16; DEFAULT_LL128_BUFFSIZE =
# NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS 8 x 8 (src/include/device.h);
# 16 channels: the NCCL INFO line of 8 x H800 in NVIDIA/nccl issue #892 ("16 coll channels")
NCCL_ONE = 16 * ((1 << 22) + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8)


def test_nccl_buffers_of_one_communicator():
    assert rm.nccl_bytes(1) == 0                         # one device: no communicator
    assert rm.nccl_bytes(2) == rm.nccl_bytes(8) == NCCL_ONE == 154_140_672


def test_training_parts_on_hopper_are_pytorchs_workspaces_and_nccl():
    # pytorch @ 26a39059 aten/src/ATen/cuda/CublasHandlePool.cpp: parseChosenWorkspaceSize "32MiB for Hopper"
    # (4096 * 8 * 1024), else ":4096:2:16:8" (4096 * 1024 * 2 + 16 * 1024 * 8); parseCUDABlasLtWorkspaceSize
    # 1024 KiB; the CUDA context: ~400 MB with lazy loading (pytorch issue #109888)
    parts = {p.name: p.bytes for p in rm.training_parts(90, {"tp": 2, "pp": 1, "dp": 4})}
    assert parts == {"CUDA context": 400_000_000, "cuBLAS workspace": 4096 * 8 * 1024,
                     "cuBLASLt workspace": 1024 * 1024, "NCCL buffers": 2 * NCCL_ONE}
    a100 = {p.name: p.bytes for p in rm.training_parts(80, {"dp": 1})}
    assert a100 == {"CUDA context": 400_000_000, "cuBLAS workspace": 4096 * 1024 * 2 + 16 * 1024 * 8,
                    "cuBLASLt workspace": 1024 * 1024}   # no communicator of more than one device
    # a class with its own measured context: an RTX 3090's 256 MiB (InvokeAI issue #9413)
    assert rm.training_parts(86, {})[0].bytes == 256 * 2**20


def test_training_reserve_takes_the_memory_cuda_reports_on_a_preset():
    # vllm PR #10511 on an H100: total_gpu_memory 79.22GiB (torch.cuda.mem_get_info's total), floored to bytes
    r = rm.training_reserve(preset("h100-sxm"), {"dp": 8}, 80_000_000_000, given=False)
    assert r.capacity == int(7922 * GIB // 100) == H100_SXM_CUDA and "[visible.h100-sxm]" in r.capacity_from
    assert r.bytes == 400_000_000 + 33_554_432 + 1_048_576 + NCCL_ONE == 588_743_680
    assert r.words().startswith("runtime: CUDA context 400.00 MB + cuBLAS workspace 33.55 MB")
    given = rm.training_reserve(preset("h100-sxm"), {"dp": 8}, 80_000_000_000, given=True)   # --memory 80GB: as given
    assert (given.capacity, given.capacity_from) == (80_000_000_000, None)
    assert rm.training_reserve(preset("a100-80gb-sxm"), {}, 80_000_000_000, given=False).capacity == 80_000_000_000


def test_training_parts_are_named_by_the_presets_vendor():
    # was "CUDA context + cuBLAS workspace + NCCL buffers" on MI300X and TPU presets. PyTorch on ROCm
    # (pytorch @ 26a39059 aten/src/ATen/cuda/CublasHandlePool.cpp, USE_ROCM): parseChosenWorkspaceSize "32MiB
    # default, 128MiB for gfx94x/gfx95x" (1024 * 128 * 1024 on gfx942 MI300X/MI325X, gfx950 MI355X; 1024 * 32 *
    # 1024 elsewhere: MI250X is gfx90a); parseCUDABlasLtWorkspaceSize "Use 76 MB for hipBLASLt" (76*1024 KiB x 1024)
    def parts(name, groups):
        return {p.name: p.bytes for p in rm.training_reserve(preset(name), groups, 10**11, given=True).parts}

    # the HIP context and RCCL's buffers have no ROCm source: estimates, named so (runtime_memory.toml [rocm]:
    # CUDA's 400 MB, pytorch issue #109888; NCCL's default buffers)
    assert parts("mi300x", {"tp": 2}) == {"HIP context (estimate)": 400_000_000, "hipBLAS workspace": 1024 * 128 * 1024,
                                          "hipBLASLt workspace": 76 * 1024 * 1024, "RCCL buffers (estimate)": NCCL_ONE}
    assert parts("mi250x", {})["hipBLAS workspace"] == 1024 * 32 * 1024
    # the architecture is the preset's (hardware.toml gfx_target; AMD's GPU hardware specifications), PyTorch's
    # test a prefix of it (isGPUArch({"gfx94", "gfx95"})): every gfx94x/gfx95x target gets the 128 MiB
    assert [preset(n).gfx_target for n in ("mi300x", "mi325x", "mi355x", "mi250x")] == ["gfx942", "gfx942", "gfx950",
                                                                                       "gfx90a"]
    assert parts("mi355x", {})["hipBLAS workspace"] == parts("mi325x", {})["hipBLAS workspace"] == 1024 * 128 * 1024
    assert {p.name: p.bytes for p in rm.training_parts(None, {}, "AMD", "gfx941")}["hipBLAS workspace"] == 128 * 2**20
    assert preset("h100-sxm").gfx_target is None
    amd = rm.training_reserve(preset("mi300x"), {"tp": 2}, 10**11, given=True).parts
    assert "ESTIMATE, no ROCm figure found" in amd[0].source and "estimate: NCCL's default buffers" in amd[3].source
    # no CUDA, cuBLAS or NCCL on a TPU: one part of 0 bytes that says no source gives it
    tpu = rm.training_reserve(preset("tpu-v5p"), {"tp": 2}, 10**11, given=True)
    assert tpu.bytes == 0 and tpu.words() == "runtime: no source for Google's runtime memory (give --reserve 0.1 " \
                                             "or a size)"
    assert parts("h100-sxm", {"tp": 2}).keys() == {"CUDA context", "cuBLAS workspace", "cuBLASLt workspace",
                                                   "NCCL buffers"}


def test_vllm_non_torch_is_the_newest_log_of_the_preset_plus_nccl_by_tp():
    # H100: the newest log is vllm PR #12126 (2025-01-16, TP 1): "non_torch_memory takes 0.16GiB"; PR #10511's
    # 1.79 / 3.58 GiB (2024-12-13) are older. TP 2 and 4 add one TP communicator's NCCL buffers.
    b1 = int(16 * GIB // 100)
    assert rm.vllm_non_torch("h100-sxm", 1, 1)[0] == b1 == 171_798_691
    assert rm.vllm_non_torch("h100-sxm", 2, 1)[0] == rm.vllm_non_torch("h100-sxm", 4, 1)[0] == b1 + NCCL_ONE
    # no log of the device: the fallback given (0.35 GiB, vllm issue #10517), plus NCCL under TP
    n, words = rm.vllm_non_torch("a100-80gb-sxm", 2, 375_809_638)
    assert n == 375_809_638 + NCCL_ONE and "no vLLM log of this device" in words
    assert rm.vllm_non_torch(None, 1, 375_809_638)[0] == 375_809_638


def test_a_users_log_is_an_entry_of_their_own(tmp_path, monkeypatch):
    # COSTGRAPH_DATA adds entries (never replaces): a user's own start-up log of an A100 at TP 2
    (tmp_path / "runtime_memory.toml").write_text(
        '[vllm.my-a100]\ndescription = "my log"\nhardware = "a100-80gb-sxm"\n'
        'tp = 2                # source: my vllm serve log, 2026-12-01\ndate = "2026-12-01"\n'
        'gib = "0.5"           # source: my vllm serve log: non_torch_memory takes 0.50GiB\n', encoding="utf-8")
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    n, words = rm.vllm_non_torch("a100-80gb-sxm", 2, 1)
    assert n == GIB // 2 and "[vllm.my-a100]" in words
    (tmp_path / "runtime_memory.toml").write_text(   # a bundled name is refused, located
        '[vllm.h100-tp1-pr12126]\ndescription = "x"\nhardware = "h100-sxm"\ntp = 1  # source: x x x x x x\n'
        'date = "2026"\ngib = "9"  # source: x x x x x x\n', encoding="utf-8")
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match="is a bundled vLLM non-torch figure already"):
        rm.vllm_non_torch("h100-sxm", 1, 1)


def test_the_runtime_reserve_is_counted_per_layout_never_as_a_flat_size():
    # train, fit and plan count `runtime` per layout from its parallel groups (training/api._groups and
    # training/planning._RuntimeReserve both call parallel_groups); reserve_bytes, which knows only the device,
    # refuses it and names the fixed forms in the hint
    from costgraph.errors import CostgraphValueError
    from costgraph.training.fit import reserve_bytes

    with pytest.raises(CostgraphValueError, match="--reserve runtime depends on a layout's parallel groups") as e:
        reserve_bytes("runtime", 80_000_000_000)
    assert "--reserve 0.1" in e.value.hint and "planner keeps" not in str(e.value)
    assert reserve_bytes(None, 80_000_000_000) == 8_000_000_000   # the flat default (serving) stays 0.1 of the device


def test_parallel_groups_are_the_five_degrees_that_are_numbers():
    import sympy

    assert rm.parallel_groups(2, 1, 1, 4, 1) == {"tp": 2, "pp": 1, "cp": 1, "dp": 4, "ep": 1}
    got = rm.parallel_groups(sympy.Integer(8), 2, None, sympy.Symbol("N_d"), True)   # a free symbol: size unknown
    assert got == {"tp": 8, "pp": 2} and type(got["tp"]) is int
    # two communicators above one device (TP 8, PP 2): NCCL's buffers of each
    assert rm.nccl_part(got).bytes == 2 * NCCL_ONE


def test_train_names_its_reserve_and_keeps_the_flat_rule_on_request():
    import costgraph

    gpt = costgraph.load("gpt")
    v = gpt.values("gpt2")
    r = gpt.train(t=2, gpus=4, zero=1, values=v, hardware="h100-sxm")
    parts = {p["name"]: p["bytes"] for p in r.fits["reserve_parts"]}
    assert parts["NCCL buffers"] == 2 * NCCL_ONE                      # the TP 2 and the DP 2 communicators
    assert r.fits["reserve_bytes"] == sum(parts.values()) and r.fits["reserve_from"].startswith("runtime: ")
    # a fraction of the device memory as CUDA reports it, the capacity the runtime reserve takes (the memory
    # convention cuda, choices.MEMORY_CONVENTION: torch.cuda.mem_get_info's total, vLLM's total_gpu_memory
    # 79.22 GiB on an H100 SXM, vllm PR #10511; floored to 85,061,827,297 B): 0.1 of it rounded up to a byte
    flat = gpt.train(t=2, gpus=4, zero=1, values=v, hardware="h100-sxm", reserve="0.1")
    assert (flat.fits["capacity_bytes"], flat.fits["reserve_bytes"], flat.fits["reserve_from"]) == \
        (H100_SXM_CUDA, 8_506_182_730, "--reserve") and "[visible.h100-sxm]" in flat.fits["capacity_from"]
    assert r.fits["capacity_bytes"] == flat.fits["capacity_bytes"] == r.settings.memory   # one capacity, every form
    # the printed figure on request (NVIDIA's datasheet 80 GB = 8·10^10 B), named; --memory, the user's own figure, wins
    nominal = gpt.train(t=2, gpus=4, zero=1, values=v, hardware="h100-sxm", reserve="8GB", memory_convention="nominal")
    assert (nominal.fits["capacity_bytes"], nominal.fits["reserve_bytes"]) == (80_000_000_000, 8_000_000_000)
    assert nominal.fits["capacity_from"].startswith("memory convention nominal, h100-sxm's printed figure")
    given = gpt.train(t=2, gpus=4, zero=1, values=v, hardware="h100-sxm", reserve="0.1", memory="75GiB")
    assert (given.fits["capacity_bytes"], given.fits["reserve_bytes"], given.fits.get("capacity_from")) == \
        (75 * GIB, -(-75 * GIB // 10), None)
    with pytest.raises(costgraph.errors.CostgraphValueError, match="--memory gives it"):
        gpt.train(t=2, gpus=4, values=v, hardware="h100-sxm", memory="75GiB", memory_convention="nominal")


def test_fit_reads_the_device_memory_as_train_does():
    # fit --train takes train's verdict (costgraph.verdict): the same capacity under each memory convention, named
    import costgraph

    gpt = costgraph.load("gpt")
    v = gpt.values("gpt2")
    cuda = costgraph.fit(gpt, v, hardware="h100-sxm", gpus=4, t=2, zero=1, reserve="0.1")
    assert (cuda.capacity_bytes, cuda.usable_bytes) == (H100_SXM_CUDA, H100_SXM_CUDA - 8_506_182_730)
    assert "[visible.h100-sxm]" in cuda.settings["reserve"]
    nominal = costgraph.fit(gpt, v, hardware="h100-sxm", gpus=4, t=2, zero=1, reserve="0.1", memory_convention="nominal")
    assert (nominal.capacity_bytes, nominal.usable_bytes) == (80_000_000_000, 72_000_000_000)
    assert "memory convention nominal" in nominal.settings["reserve"]


def test_nominal_without_a_preset_is_refused(capsys):
    # trial 8: `train llama --config llama-3-8b --gpus 8 --memory-convention nominal` (no --hardware) ran with exit 0,
    # the convention reading nothing (--reserve alone is refused there); not given (None) passes; cuda given is
    # refused as nominal is (trial 8 leftover: one convention was accepted where the other was refused)
    from costgraph.cli import main
    from costgraph.errors import CostgraphValueError
    from costgraph.runtime_memory import device_memory

    assert device_memory(None) is None
    for convention in ("cuda", "nominal"):
        with pytest.raises(CostgraphValueError, match="reads a preset's memory, but no --hardware names one"):
            device_memory(None, convention)
    for argv in (["train", "llama", "--config", "llama-3-8b", "--gpus", "8"], ["train", "--params", "7e9", "--gpus", "8"],
                 ["infer", "llama", "--config", "llama-3-8b", "--prompt", "10", "--generate", "10"]):
        for convention in ("cuda", "nominal"):
            assert main([*argv, "--memory-convention", convention]) == 2
            assert "hint: give --hardware NAME, or drop --memory-convention" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["train", "gpt", "--config", "gpt2", "--gpus", "1"],
                                     ["fit", "gpt", "--config", "gpt2", "--set", "b=1", "s=1024", "--gpus", "1"],
                                     ["fit", "gpt", "--serve", "--prompt", "5", "--generate", "2"]])
@pytest.mark.parametrize("convention", ["cuda", "nominal"])
def test_either_convention_beside_memory_is_refused(command, convention, capsys):
    # trial 8 leftover: --memory 80GB --memory-convention cuda was accepted, nominal refused; each reads a preset's
    # memory, which --memory replaces: both refused alike, with the hint (exit 2)
    from costgraph.cli import main

    assert main([*command, "--hardware", "h100-sxm", "--memory", "80GB", "--memory-convention", convention]) == 2
    err = capsys.readouterr().err
    assert f"error: --memory-convention {convention} reads a preset's memory, but --memory gives it" in err
    assert "hint: drop --memory-convention (--memory is the device memory)" in err


def test_a_preset_without_a_visible_entry_says_what_was_assumed():
    # trial 8 leftover: train, fit and plan said nothing of the convention on the presets without a [visible.NAME]
    # entry (all but h100-sxm); they name the printed figure taken (hardware.toml a100-80gb-sxm memory_bytes: the
    # A100 datasheet's 80GB), as infer does
    import costgraph
    from costgraph.runtime_memory import preset_capacity

    seen = preset_capacity(preset("a100-80gb-sxm"), False)
    assert (seen.bytes, seen.convention) == (80_000_000_000, "cuda")
    assert seen.source.startswith("as printed (memory convention cuda, but no [visible.a100-80gb-sxm] entry in "
                                  "runtime_memory.toml): a100-80gb-sxm's printed figure: A100 datasheet (2021)")
    r = rm.training_reserve(preset("a100-80gb-sxm"), {}, 80_000_000_000, given=False)
    assert (r.capacity, r.capacity_from) == (80_000_000_000, seen.source)
    gpt = costgraph.load("gpt")
    v = gpt.values("gpt2")
    trained = gpt.train(t=2, gpus=2, values=v, hardware="a100-80gb-sxm")
    assert trained.fits["capacity_from"] == seen.source and seen.source in trained.to_text()
    fitted = costgraph.fit(gpt, v, hardware="a100-80gb-sxm", gpus=2, t=2)
    assert "as printed (memory convention cuda, but no [visible.a100-80gb-sxm] entry" in fitted.to_text()
    # the words without the datasheet's line (plan's header): data the figure carries, no message parsed
    assert seen.brief == "as printed (memory convention cuda, but no [visible.a100-80gb-sxm] entry in runtime_memory.toml)"
    assert rm.device_memory(preset("h100-sxm")).brief == \
        "as CUDA reports it (memory convention cuda): runtime_memory.toml [visible.h100-sxm]"
    assert rm.device_memory(preset("h100-sxm"), "nominal").brief == "memory convention nominal"


@pytest.mark.parametrize("text,message", [
    ("[h100-sxm-x]\nfoo = 1\n", ":1:1: unknown key 'h100-sxm-x'"),      # a table outside the file's groups
    ("\nvisible = 1\n", ":2:1: 'visible' is not a table"),              # a group written as a key
])
def test_a_users_file_errors_outside_an_entry_are_located(tmp_path, monkeypatch, text, message):
    # session 44 trial12: these named the file alone; every other data-file error reads FILE:LINE:COLUMN
    from costgraph.errors import CostgraphValueError

    path = tmp_path / "runtime_memory.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    with pytest.raises(CostgraphValueError) as e:
        rm.vllm_non_torch("h100-sxm", 1, 1)
    assert e.value.message.startswith(f"{path}{message}")
