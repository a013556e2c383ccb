"""CPU/NVMe offload (issue 16 item 6): DeepSpeed's ZeRO estimators with every offload row,
their printed tables, and the model path's device, host and NVMe bytes and host-link time.

Sources:
* DeepSpeed @ 38327e07, deepspeed/runtime/zero/stage_1_and_2.py::estimate_zero2_model_states_mem_needs
  and ::estimate_zero2_model_states_mem_needs_all_cold; deepspeed/runtime/zero/stage3.py::
  estimate_zero3_model_states_mem_needs and ::estimate_zero3_model_states_mem_needs_all_cold
  (transcribed below, verbatim but for the print → return of the tables);
* DeepSpeed @ 38327e07, docs/code-docs/source/memory.rst (the tables as they print them);
* TransformerEngine @ d0067d0d, transformer_engine/pytorch/cpu_offload.py::get_cpu_offload_context
  (activation memory (L − k)·T with k of L layers offloaded).
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.export import schema as schemas
from costgraph.parallel.layout import Layout
from costgraph.training import largest_module_params
from costgraph.training.bare import deepspeed_offload_estimate, deepspeed_table

# --- DeepSpeed @ 38327e07, transcribed --------------------------------------------------------


def ds_zero2(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    # deepspeed/runtime/zero/stage_1_and_2.py::estimate_zero2_model_states_mem_needs
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
             cpu_offload_params=True, zero_init=True, additional_buffer_factor=1.5):
    # deepspeed/runtime/zero/stage3.py::estimate_zero3_model_states_mem_needs
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = (4 * largest_layer_params)
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


CPU = "cpu "   # f'{OffloadDeviceEnum.cpu:4}' as Python <= 3.10 prints it (the docs' tables)


def ds_zero2_all_cold(total_params, num_gpus_per_node=1, num_nodes=1, additional_buffer_factor=1.5):
    # stage_1_and_2.py::estimate_zero2_model_states_mem_needs_all_cold, printing into a string
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        def format_options(cpu_offload):
            enabled = []
            device = f'{CPU:4}' if cpu_offload else "none"
            enabled.append(f"offload_optimizer={device}")
            return ", ".join(enabled)

        nodes_str = "nodes" if num_nodes > 1 else "node"
        gpus_str = "GPUs" if num_gpus_per_node > 1 else "GPU"
        print("Estimated memory needed for params, optim states and gradients for a:\n"
              f"HW: Setup with {num_nodes} {nodes_str}, {num_gpus_per_node} {gpus_str} per node.\n"
              f"SW: Model with {int(total_params/1e6)}M total params.")
        print("  per CPU  |  per GPU |   Options")
        for cpu_offload in [True, False]:
            cpu_mem, gpu_mem = ds_zero2(total_params=total_params, num_gpus_per_node=num_gpus_per_node,
                                        num_nodes=num_nodes, cpu_offload=cpu_offload,
                                        additional_buffer_factor=additional_buffer_factor)
            options_str = format_options(cpu_offload=cpu_offload)
            print(f" {cpu_mem/2**30:7.2f}GB | {gpu_mem/2**30:6.2f}GB | {options_str}")
    return out.getvalue().rstrip("\n")


def ds_zero3_all_cold(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1,
                      additional_buffer_factor=1.5):
    # stage3.py::estimate_zero3_model_states_mem_needs_all_cold, printing into a string
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        def format_options(cpu_offload, cpu_offload_params, zero_init):
            enabled = []
            padded_cpu_str = f'{CPU:4}'
            param_device = padded_cpu_str if cpu_offload_params else "none"
            enabled.append(f"offload_param={param_device}")
            optimizer_device = padded_cpu_str if cpu_offload else "none"
            enabled.append(f"offload_optimizer={optimizer_device}")
            enabled.append(f"zero_init={1 if zero_init else 0}")
            return ", ".join(enabled)

        nodes_str = "nodes" if num_nodes > 1 else "node"
        gpus_str = "GPUs" if num_gpus_per_node > 1 else "GPU"
        print("Estimated memory needed for params, optim states and gradients for a:\n"
              f"HW: Setup with {num_nodes} {nodes_str}, {num_gpus_per_node} {gpus_str} per node.\n"
              f"SW: Model with {int(total_params/1e6)}M total params, {int(largest_layer_params/1e6)}M largest layer params.")
        print("  per CPU  |  per GPU |   Options")
        for cpu_offload in [True, False]:
            for cpu_offload_params in [True, False]:
                if not cpu_offload and cpu_offload_params:
                    continue
                for zero_init in [True, False]:
                    cpu_mem, gpu_mem, largest_layer_memory = ds_zero3(
                        total_params=total_params, largest_layer_params=largest_layer_params,
                        num_gpus_per_node=num_gpus_per_node, num_nodes=num_nodes, cpu_offload=cpu_offload,
                        cpu_offload_params=cpu_offload_params, zero_init=zero_init,
                        additional_buffer_factor=additional_buffer_factor)
                    options_str = format_options(cpu_offload=cpu_offload, cpu_offload_params=cpu_offload_params,
                                                 zero_init=zero_init)
                    print(f" {cpu_mem/2**30:7.2f}GB | {gpu_mem/2**30:6.2f}GB | {options_str}")
    return out.getvalue().rstrip("\n")


# (total params, largest layer params): t5-3b as the docs count it, Llama-2-7B (its embedding is
# its largest module), Llama-2-70B (the same), an odd count
COUNTS = [(2_851_000_000, 32_000_000), (6_738_415_616, 131_072_000), (68_976_648_192, 262_144_000),
          (123_456_789, 1_234_567)]
SETUPS = [(1, 1), (8, 1), (8, 2), (4, 3), (8, 16), (2, 7)]   # (gpus per node, nodes)


@pytest.mark.parametrize("P, L", COUNTS)
@pytest.mark.parametrize("gpn, nodes", SETUPS)
def test_every_offload_row_equals_deepspeeds_estimators(P, L, gpn, nodes):
    for opt in (True, False):
        assert deepspeed_offload_estimate(P, stage=2, gpus_per_node=gpn, nodes=nodes, offload_optimizer=opt) == \
            ds_zero2(P, gpn, nodes, cpu_offload=opt)
        for par in ((True, False) if opt else (False,)):
            for init in (True, False):
                cpu, gpu = deepspeed_offload_estimate(P, stage=3, largest_layer_params=L, gpus_per_node=gpn,
                                                      nodes=nodes, offload_optimizer=opt, offload_params=par,
                                                      zero_init=init)
                assert (cpu, gpu) == ds_zero3(P, L, gpn, nodes, opt, par, init)[:2]
                assert isinstance(cpu, sympy.Integer) and isinstance(gpu, sympy.Integer)


def test_float_rounding_is_deepspeeds_own():
    # 3 nodes: 1/3 is not a binary fraction; DeepSpeed's int(P·16·(1/3)·1.5) falls one byte short of the
    # exact 8P for P = 6,738,415,618. Whole numbers round as DeepSpeed does; SymPy values are exact.
    P, L = 6_738_415_618, 131_072_000
    cpu, _ = deepspeed_offload_estimate(P, stage=3, largest_layer_params=L, gpus_per_node=8, nodes=3)
    assert cpu == ds_zero3(P, L, 8, 3, True, False, True)[0] == 8 * P - 1 == 53_907_324_943
    exact, _ = deepspeed_offload_estimate(sympy.Integer(P), stage=3, largest_layer_params=sympy.Integer(L),
                                          gpus_per_node=sympy.Integer(8), nodes=sympy.Integer(3))
    assert exact == 8 * P


def test_symbolic_rows_are_the_formulas():
    P, L = sympy.symbols("P L", positive=True, integer=True)
    # ZeRO 3, optimizer + parameters, zero_init: 18P/nodes · 1.5 (per node); GPU 4L
    assert deepspeed_offload_estimate(P, stage=3, largest_layer_params=L, gpus_per_node=8, nodes=2,
                                      offload_params=True) == (sympy.floor(sympy.Rational(27, 2) * P), 4 * L)
    # without zero_init: P·max(4·8, 18/2)·1.5 = 48P
    assert deepspeed_offload_estimate(P, stage=3, largest_layer_params=L, gpus_per_node=8, nodes=2,
                                      offload_params=True, zero_init=False)[0] == 48 * P
    # optimizer only: GPU 4L + ⌊2P/16⌋
    assert deepspeed_offload_estimate(P, stage=3, largest_layer_params=L, gpus_per_node=8, nodes=2)[1] == \
        4 * L + sympy.floor(P / 8)
    # ZeRO 2 offload: GPU 2P, CPU P·max(4·16, 16)·1.5 = 96P
    assert deepspeed_offload_estimate(P, stage=2, gpus_per_node=8, nodes=2) == (96 * P, 2 * P)


def test_rows_refuse_what_deepspeed_does_not_estimate():
    with pytest.raises(CostgraphValueError, match="stages 2 and 3"):
        deepspeed_offload_estimate(10**9, stage=1)
    with pytest.raises(CostgraphValueError, match="parameters only at ZeRO 3"):
        deepspeed_offload_estimate(10**9, stage=2, offload_params=True)
    with pytest.raises(CostgraphValueError, match="parameters only at ZeRO 3"):
        deepspeed_offload_estimate(10**9, stage=3, offload_optimizer=False, offload_params=True)
    with pytest.raises(CostgraphValueError, match="positive integer"):
        deepspeed_offload_estimate(0, stage=2)


def test_zero3_table_as_the_docs_print_it():
    # DeepSpeed @ 38327e07 docs/code-docs/source/memory.rst: estimate_zero3_model_states_mem_needs_all_cold(
    #   total_params=2851e6, largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1)
    printed = """Estimated memory needed for params, optim states and gradients for a:
HW: Setup with 1 node, 8 GPUs per node.
SW: Model with 2851M total params, 32M largest layer params.
  per CPU  |  per GPU |   Options
   71.69GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=1
  127.45GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=0
   63.72GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=1
  127.45GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=0
    1.43GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=1
  127.45GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=0"""
    assert deepspeed_table(2851e6, stage=3, largest_layer_params=32e6, gpus_per_node=8) == printed
    assert deepspeed_table(2_851_000_000, stage=3, largest_layer_params=32_000_000, gpus_per_node=8) == printed


def test_zero2_table_offload_row_as_the_docs_print_it():
    # memory.rst prints, for all_cold(total_params=2851e6, num_gpus_per_node=8):
    #   127.45GB |   5.31GB | offload_optimizer=cpu
    #   127.45GB |  15.93GB | offload_optimizer=none
    # The second row is from an older formula (the docs' own "4 * params + 16 * params / gpus");
    # the source at 38327e07 computes 2P + int(18P/8) = 11.28 GiB. The source is what is reproduced.
    lines = deepspeed_table(2851e6, stage=2, gpus_per_node=8).splitlines()
    assert lines[4].rstrip() == "  127.45GB |   5.31GB | offload_optimizer=cpu"
    assert lines[5] == "  127.45GB |  11.28GB | offload_optimizer=none"


@pytest.mark.parametrize("P, L", COUNTS)
@pytest.mark.parametrize("gpn, nodes", [(1, 1), (8, 1), (8, 4), (4, 3)])
def test_tables_equal_deepspeeds_printing(P, L, gpn, nodes):
    assert deepspeed_table(P, stage=2, gpus_per_node=gpn, nodes=nodes) == ds_zero2_all_cold(P, gpn, nodes)
    assert deepspeed_table(P, stage=3, largest_layer_params=L, gpus_per_node=gpn, nodes=nodes) == \
        ds_zero3_all_cold(P, L, gpn, nodes)


def test_llama_2_7b_table_from_the_model(capsys):
    # the model path: Llama-2-7B's own count (6,738,415,616) and largest module (the 32000 × 4096 embedding)
    m = costgraph.load("llama")
    v = m.values("llama-2-7b")
    assert m.costs("model")["params"].xreplace(v) == 6_738_415_616
    assert largest_module_params(m.graph).xreplace(v) == 131_072_000
    assert main(["train", "llama", "--config", "llama-2-7b", "--gpus", "8", "--zero", "3", "--attention", "flash",
                 "--deepspeed-table", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["deepspeed"]["table"] == ds_zero3_all_cold(6_738_415_616, 131_072_000, 8, 1)
    assert doc["deepspeed"]["rows"][0] == {"offload_optimizer": "cpu", "offload_param": "cpu", "zero_init": True,
                                           "cpu_bytes": 6_738_415_616 * 27, "gpu_bytes": 524_288_000}
    assert not list(schemas.validator("train").iter_errors(doc))


def test_bare_params_table_and_offload(capsys):
    assert main(["train", "--params", "6738415616", "--gpus", "16", "--gpus-per-node", "8", "--zero", "3",
                 "--precision", "mixed-fp32-grads", "--offload-optimizer", "cpu", "--offload-params", "cpu",
                 "--deepspeed-table", "--largest-layer-params", "131072000", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    P = 6_738_415_616
    assert doc["memory"]["total"]["value"] == 0                       # everything left the device
    assert doc["offload"]["host"] == 18 * P // 16                      # 2 + 4 + 4 + 8 bytes, sharded over 16
    assert doc["offload"]["host_per_node"] == 18 * P // 2
    # DeepSpeed's zero_init row: 18P/nodes · 1.5 per node — ours without the 1.5 buffer factor
    assert doc["deepspeed"]["rows"][0]["cpu_bytes"] == ds_zero3(P, 131_072_000, 8, 2)[0]
    assert doc["offload"]["host_per_node"] * 3 // 2 == doc["deepspeed"]["rows"][0]["cpu_bytes"]
    assert doc["deepspeed"]["table"] == ds_zero3_all_cold(P, 131_072_000, 8, 2)
    assert not list(schemas.validator("train").iter_errors(doc))


# --- the model path ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2", b=1, s=1024)


def _top(res):
    return {k: int(v.xreplace(res.values)) for k, v in res.stages[0].memory.items()}


GPT2 = 124_439_808   # GPT-2 small, tied head


def test_gpt2_bytes_under_each_offload_setting(gpt):
    m, v = gpt
    base = dict(gpus=4, zero=3, policy="mixed-fp32-grads", attention="eager")
    none = _top(m.train(values=v, **base))
    g = none["weights"] - 2 * GPT2 // 4                                  # the gathered unit, on the device
    assert none["gradients"] == 6 * GPT2 // 4 and none["optimizer"] == 12 * GPT2 // 4
    opt = _top(m.train(values=v, offload_optimizer="cpu", **base))
    assert (opt["weights"], opt["gradients"], opt["optimizer"]) == (none["weights"], 0, 0)
    assert opt["host"] == 16 * GPT2 // 4 and opt["nvme"] == 0            # fp32 grads + master + Adam: DeepSpeed's 16
    # DeepSpeed @ 38327e07 stage3.py::partition_grads: grad_buffer.float() copied out (4 B); the 16-bit partition
    # back with a blocking copy_ (_reassign_or_swap_out_partitioned_parameters: converted on the CPU, 2 B)
    assert opt["host_link_d2h"] == 4 * GPT2 // 4 and opt["host_link_h2d"] == opt["host_link_after"] == 2 * GPT2 // 4
    assert opt["cpu_step_bytes"] == 28 * GPT2 // 4                      # cpu_adam.h Step_AVX: 4 loads, 3 stores of fp32
    both = _top(m.train(values=v, offload_optimizer="cpu", offload_params="cpu", **base))
    assert (both["weights"], both["gradients"], both["optimizer"]) == (g, 0, 0)
    assert both["host"] == 18 * GPT2 // 4                                # DeepSpeed's 18P/G per GPU
    assert both["host_link_h2d"] == 2 * (2 * GPT2 // 4)                 # the shard fetched for forward and backward
    nvme = _top(m.train(values=v, offload_optimizer="nvme", offload_params="nvme", **base))
    assert (nvme["host"], nvme["nvme"]) == (0, 18 * GPT2 // 4)
    mixed = _top(m.train(values=v, offload_optimizer="cpu", offload_params="nvme", **base))
    assert (mixed["host"], mixed["nvme"]) == (16 * GPT2 // 4, 2 * GPT2 // 4)
    z2 = _top(m.train(values=v, offload_optimizer="cpu", **{**base, "zero": 2}))
    assert (z2["weights"], z2["gradients"], z2["optimizer"], z2["host"]) == (2 * GPT2, 0, 0, 16 * GPT2 // 4)
    for r in (opt, both, nvme, z2):
        assert r["total"] == r["weights"] + r["gradients"] + r["optimizer"] + r["activations"]
        assert r["activations"] == none["activations"]


def test_activation_offload_moves_the_layers_share(gpt):
    # Transformer Engine: offloading k of L layers leaves (L − k)·T on the device
    m, v = gpt
    base = dict(gpus=1, attention="eager")
    none = _top(m.train(values=v, **base))
    layer = int(m.train(values=v, scope="layer", **base).stages[0].memory["activations"].xreplace(v))
    all_ = _top(m.train(values=v, offload_activations=True, **base))
    assert all_["host"] == 12 * layer                                   # GPT-2 small: 12 layers
    assert all_["activations"] == none["activations"] - 12 * layer     # embeddings' and the loss's stay
    half = _top(m.train(values=v, offload_activations=sympy.Rational(1, 2), **base))
    assert half["host"] == 6 * layer and half["activations"] == none["activations"] - 6 * layer
    assert half["host_link_d2h"] == half["host_link_h2d"] == 6 * layer   # one micro-batch out and back
    assert (half["weights"], half["gradients"], half["optimizer"]) == \
        (none["weights"], none["gradients"], none["optimizer"])


def test_host_link_seconds_and_the_step(gpt):
    m, v = gpt
    res = m.train(values=v, gpus=4, zero=2, policy="mixed-fp32-grads", attention="eager",
                  offload_optimizer="cpu", hardware="a100-80gb-sxm")
    sec = {k: x.xreplace(v) for k, x in res.offload["seconds"].items()}
    part = GPT2 // 4                                                     # each device's partition (ZeRO 2 over 4)
    # A100 datasheet: PCIe Gen4 64 GB/s both directions → 32e9 B/s each way. DeepSpeed @ 38327e07
    # stage_1_and_2.py: async_inplace_copy_grad_to_fp32_buffer_from_gpu copies src.float() out with
    # non_blocking=True during the backward (4 B a gradient, beside the compute); step() runs the CPU Adam, then
    # bit16_partitions[...].copy_(fp32_partition.to(device)): the fp32 partition back (4 B), in series
    assert sec["d2h"] == sympy.Rational(4 * part, 32 * 10**9) == sec["link"] and sec["h2d"] == 0
    assert sec["after"] == sympy.Rational(4 * part, 32 * 10**9)
    # cpu_adam.h Step_AVX: loads grad, exp_avg, exp_avg_sq, param and stores param, exp_avg, exp_avg_sq (fp32):
    # 28 B a parameter, 4 devices of the node at once over DGX A100's 2 x EPYC 7742 (8 x DDR4-3200: 204.8 GB/s each)
    assert sec["cpu_step"] == sympy.Rational(28 * part * 4, 409_600_000_000)
    assert sec["serial"] == sec["cpu_step"] + sec["after"]
    step = {k: x.xreplace(v) for k, x in res.step.items()}
    assert step["offload"] == sec["link"] and step["offload_serial"] == sec["serial"]
    # the serial part and the exposed communication are added to the busy time (costgraph.training.overlap)
    assert step["total"] == max(step["compute"] + step["bubble"], step["offload"]) + step["offload_serial"] \
        + step["communication_exposed"]
    assert res.offload["devices_per_node"] == 4                          # the job's 4 GPUs, under the preset's 8
    assert res.offload["host_per_node"].xreplace(v) == 4 * (16 * GPT2 // 4)
    doc = res.to_dict()
    assert doc["offload"]["host"]["value"] == 16 * GPT2 // 4
    assert not list(schemas.validator("train").iter_errors(doc))
    # a preset that publishes no host-link bandwidth: bytes, no seconds, no step term
    tpu = m.train(values=v, gpus=4, zero=2, offload_optimizer="cpu", attention="eager", hardware="tpu-v5p")
    assert tpu.offload["seconds"] is None and "offload" not in tpu.step and "offload_serial" not in tpu.step
    # the same layout without offload: the offload row is slower by at least the serial part
    plain = m.train(values=v, gpus=4, zero=2, policy="mixed-fp32-grads", attention="eager", hardware="a100-80gb-sxm")
    assert step["total"] >= plain.step["total"].xreplace(v) + sec["serial"]


def test_defaults_change_nothing(gpt):
    m, v = gpt
    L = Layout()
    assert (L.offload_optimizer, L.offload_params, L.offload_activations) == ("none", "none", False)
    res = m.train(values=v, gpus=4, zero=3, attention="eager", hardware="h100-sxm")
    assert res.offload is None and "host" not in res.stages[0].memory and "offload" not in res.step
    assert "offload" not in res.to_dict()


def test_host_link_fields_of_the_presets():
    from costgraph.hardware import preset

    assert preset("a100-80gb-sxm").host_link_bandwidth == 32 * 10**9     # PCIe Gen4 x16, per direction
    assert preset("h100-sxm").host_link_bandwidth == 64 * 10**9          # PCIe Gen5 x16
    assert preset("gb200").host_link_bandwidth == 450 * 10**9            # NVLink-C2C 900 GB/s both ways
    assert preset("b200").host_link_bandwidth is None                    # not published: left out
    # DGX H100: 2 x Xeon Platinum 8480C, 8 channels of DDR5-4800 each (8 x 4.8e9 x 8 B = 307.2 GB/s a socket)
    assert preset("h100-sxm").host_memory_bandwidth == 2 * 8 * 4800 * 10**6 * 8
    assert "8480C" in preset("h100-sxm").source("host_memory_bandwidth")
    assert preset("mi300x").host_memory_bandwidth is None                # no reference node: not timed
    assert "PCIe Gen5" in preset("h100-sxm").source("host_link_bandwidth")


@pytest.mark.parametrize("settings, message", [
    (dict(zero=2, offload_params="cpu"), "needs ZeRO 3"),
    (dict(zero=1, offload_optimizer="cpu"), "needs ZeRO 2 or 3"),
    (dict(zero=3, offload_optimizer="disk"), "unknown offload_optimizer"),
    (dict(offload_activations=sympy.Rational(3, 2)), "not a fraction in"),
    (dict(offload_activations=0.5), "true, false or a fraction"),
])
def test_layout_refuses_bad_offload(settings, message):
    with pytest.raises(CostgraphValueError, match=message):
        Layout(gpus=8, **settings).filled()


@pytest.mark.parametrize("argv, message", [
    (["train", "gpt", "--config", "gpt2", "--zero", "2", "--offload-params", "cpu"], "needs ZeRO 3"),
    (["train", "gpt", "--config", "gpt2", "--offload-activations", "2"], "not a fraction"),
    (["train", "--params", "7e9", "--zero", "1", "--deepspeed-table"], "ZeRO 2 and 3"),
    (["train", "--params", "7e9", "--gpus", "12", "--gpus-per-node", "8", "--zero", "2", "--deepspeed-table"],
     "do not fill nodes"),
])
def test_cli_errors_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_text_output_and_layer_scope(capsys):
    assert main(["train", "gpt", "--config", "gpt2", "--set", "b=1", "--set", "s=1024", "--gpus", "4", "--zero", "3",
                 "--attention", "eager", "--precision", "mixed-fp32-grads", "--offload-optimizer", "cpu",
                 "--offload-params", "cpu", "--hardware", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert f"  host memory per device  {18 * GPT2 // 4:,} bytes" in out
    assert f"  host memory per node    {18 * GPT2:,} bytes" in out            # 4 GPUs of the job on one node
    assert "(with offload, compute + bubble is at least the host link's" in out
    assert "NVMe reads and writes are not timed" not in out
    # ZeRO-Infinity's optimizer states on NVMe: only the host link was timed, the step printed as if on the host
    assert main(["train", "gpt", "--config", "gpt2", "--set", "b=1", "--set", "s=1024", "--gpus", "4", "--zero", "3",
                 "--offload-optimizer", "nvme", "--hardware", "h100-sxm"]) == 0
    assert "; NVMe reads and writes are not timed (no sourced rate)" in capsys.readouterr().out
    assert main(["train", "gpt", "--config", "gpt2", "--scope", "layer", "--zero", "2",
                 "--offload-optimizer", "cpu"]) == 0
    assert "warning: offload is not applied at scope 'layer'" in capsys.readouterr().out
    assert main(["train", "--params", "7e9", "--offload-activations", "1"]) == 2
    assert "--offload-activations needs a model" in capsys.readouterr().err


def test_train_names_the_offload_schedule(cg):
    # the text says what runs beside the compute, what runs after it in series, and the schedule's name
    r = cg("train", "gpt", "--config", "gpt2", "--set", "b=1", "--set", "s=1024", "--gpus", "4", "--zero", "2",
           "--offload-optimizer", "cpu", "--hardware", "h100-sxm", "--attention", "eager")
    assert r.returncode == 0, r.stderr
    # DGX H100: 614.4 GB/s of host memory shared by the job's 4 devices; 28 B a parameter of the
    # 31,109,952-parameter partition: 28 × 31,109,952 × 4 / 614.4e9 = 0.005671 s; 4 B each back at 64 GB/s
    assert "the CPU optimizer step 0.005671 s (host memory 614.4 GB/s per node, shared by 4 devices)" in r.stdout
    assert "the updated partition back 0.001944 s = 0.007615 s" in r.stdout
    assert "schedule deepspeed: gradients to the host during the backward" in r.stdout
    assert "+ CPU step and partition back 0.007615 s" in r.stdout
