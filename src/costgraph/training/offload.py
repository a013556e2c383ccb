"""CPU and NVMe offload: what leaves the device, what the host (or NVMe) holds,
and the seconds the host link takes — as DeepSpeed and Transformer Engine run it.

Three settings of a :class:`~costgraph.parallel.layout.Layout`:

``offload_optimizer`` (``cpu`` or ``nvme``; ZeRO 2 or 3)
    ZeRO-Offload (Ren et al. 2021, §4; DeepSpeed ``offload_optimizer``). The
    reduced gradient partition is copied to the host as it is produced and kept
    there in fp32 (DeepSpeed's ``single_partition_of_fp32_groups[i].grad``), with
    the fp32 master copy and the optimizer states; the step runs on the CPU and the
    updated 16-bit partition is copied back. The device keeps its parameters
    (and, at ZeRO 3, the gathered unit); its gradient partition and optimizer
    states go: device ``gradients`` and ``optimizer`` are 0, the host holds
    ``4·(gradient elements) + optimizer`` — with Adam 4 + 4 + 8 = 16 bytes a
    parameter, DeepSpeed's ``16`` (``estimate_zero3_model_states_mem_needs``).
    The bucket buffers of the reduction are not counted (DeepSpeed's estimators
    leave them out too). ``nvme``: the same bytes on NVMe (ZeRO-Infinity,
    Rajbhandari et al. 2021); the pinned host staging buffers are not counted.
``offload_params`` (``cpu`` or ``nvme``; ZeRO 3)
    ZeRO-Infinity's parameter offload (DeepSpeed ``offload_param``): the
    device's 16-bit parameter shard lives on the host (or NVMe); the device
    keeps only the gathered unit in flight. Each step fetches the shard twice
    (forward and backward).
``offload_activations`` (a fraction ``f`` in [0, 1]; True is 1)
    Activation offload as Transformer Engine runs it
    (``transformer_engine/pytorch/cpu_offload.py::get_cpu_offload_context``,
    TransformerEngine @ d0067d0d: the activation memory of a model of ``L``
    layers that offloads ``k`` is ``(L − k)·T``, ``T`` one layer's): ``f = k/L``
    of the layers' activations of every micro-batch in flight wait in host
    memory; the rest of the activations (embeddings, the loss's logits, the
    layer recomputed under full recomputation) stay. Each micro-batch sends
    ``f`` of its layers' activations to the host in forward and back in backward.

Per device the result adds ``host`` and ``nvme`` (bytes), the host-link
traffic per step ``host_link_d2h`` / ``host_link_h2d`` (bytes, device to host
and back), of the latter ``host_link_after`` (the updated partition copied back
after the CPU step), and ``cpu_step_bytes`` (the host-memory bytes the CPU
optimizer step reads and writes).

**Timing** (:func:`offload_seconds`; the schedule :data:`SCHEDULE`, DeepSpeed's
as DeepSpeed @ 38327e07 runs it, the one-step delayed update of Ren et al. 2021
§4.2 off as DeepSpeed's default):

* during the forward and backward, beside the computation: the gradients out
  (DeepSpeed casts the reduced partition to fp32 on the device and copies it
  with ``non_blocking=True`` on the reduction stream:
  ``stage_1_and_2.py::async_inplace_copy_grad_to_fp32_buffer_from_gpu``,
  ``stage3.py::partition_grads``: 4 bytes a gradient), ZeRO-Infinity's parameter
  fetches and Transformer Engine's activation copies; the busy time is at least
  ``max(d2h, h2d − after) / host_link_bandwidth`` (the two directions at once);
* after the backward, in series (``step()``): the optimizer step on the CPU —
  DeepSpeed's ``cpu_adam.h::Step_AVX`` loads the fp32 gradient and every fp32
  state (master weight, ``exp_avg``, ``exp_avg_sq``) and stores the states: a
  host-memory-bandwidth bound of ``4 + 2·(optimizer bytes)`` per parameter (28 for
  Adam) over the node's ``host_memory_bandwidth`` shared by the node's devices,
  all stepping at once (a lower bound: peak DRAM bandwidth, no compute) — then
  the updated partition back: ZeRO 1/2 moves the fp32 partition
  (``stage_1_and_2.py::step``: ``fp32_partition.to(device)``, 4 bytes a
  parameter), ZeRO 3 copies into the 16-bit flat buffer with a blocking
  ``copy_`` (``stage3.py::_reassign_or_swap_out_partitioned_parameters``; PyTorch
  converts on the CPU for a blocking copy, ``aten/src/ATen/native/cuda/Copy.cu``:
  the 16-bit bytes); with parameter offload nothing comes back (the host keeps
  the shard). NVMe swapping of the states is not timed (the same CPU step is).
"""


from __future__ import annotations

import sympy

from ..errors import CostgraphValueError
from .data import Policy, policy as get_policy
from .result_parts import OffloadSeconds, OffloadSettings, TrainingOffload

#: the name of the offload schedule :func:`offload_seconds` times (module docstring), as the output names it
SCHEDULE = ("deepspeed: gradients to the host during the backward (hidden behind it), then in series the CPU "
            "optimizer step at the node's host-memory bandwidth and the updated partition back")

#: bytes per element of the gradients ZeRO-Offload keeps on the host (fp32)
HOST_GRAD_BYTES = 4

#: the keys :func:`offload_memory` adds to a device's memory
OFFLOAD_KEYS = ("host", "nvme", "host_link_d2h", "host_link_h2d")
#: the further keys of the timing: the bytes back after the CPU step (part of ``host_link_h2d``), the
#: host-memory bytes of the CPU optimizer step
TIMING_KEYS = ("host_link_after", "cpu_step_bytes")


def offloaded(layout) -> bool:
    """Whether ``layout`` (filled or not) offloads anything."""
    return layout.offload_optimizer != "none" or layout.offload_params != "none" \
        or bool(layout.offload_activations)


def offload_memory(mem: dict, layout, *, gathered=0, layer_activations=0, in_flight=1) -> dict:
    """What changes in one device's memory under ``layout``'s offload settings.

    Parameters
    ----------
    mem : dict
        The device's ``weights``, ``gradients``, ``optimizer`` and ``activations``
        (bytes, SymPy), as :func:`costgraph.training.training_memory` counts them
        without offload.
    layout : Layout
        Filled (:meth:`~costgraph.parallel.layout.Layout.filled`): its
        ``offload_*`` settings, ``policy``, ``zero`` and ``m``.
    gathered : SymPy expression
        The ZeRO-3 gathered unit inside ``weights`` (it stays on the device).
    layer_activations : SymPy expression
        One micro-batch's activations of the layers (repeat groups) of this
        device: what activation offload may move.
    in_flight : SymPy expression
        Micro-batches whose activations the device holds at its peak.

    Returns
    -------
    dict
        New ``weights``, ``gradients``, ``optimizer``, ``activations`` (on the
        device) and :data:`OFFLOAD_KEYS`: ``host`` and ``nvme`` bytes per device,
        ``host_link_d2h`` and ``host_link_h2d`` bytes per device per step, and :data:`TIMING_KEYS`
        (``host_link_after``: of ``host_link_h2d``, the bytes back after the CPU step;
        ``cpu_step_bytes``: the host-memory bytes the CPU optimizer step reads and writes).
    """
    pol: Policy = get_policy(layout.policy)
    out = {k: mem[k] for k in ("weights", "gradients", "optimizer", "activations")}
    away = {"cpu": sympy.Integer(0), "nvme": sympy.Integer(0)}
    d2h = h2d = after = cpu = sympy.Integer(0)
    if layout.offload_optimizer != "none":
        if layout.zero < 2:
            raise CostgraphValueError("optimizer offload needs ZeRO 2 or 3", hint="add --zero 2")
        elements = mem["gradients"] / (pol.gradients + pol.grad_copy)   # the gradient partition (÷ n at ZeRO 2, 3)
        away[layout.offload_optimizer] += HOST_GRAD_BYTES * elements + mem["optimizer"]
        d2h += elements * HOST_GRAD_BYTES                               # the reduced gradients, cast to fp32 first
        cpu = HOST_GRAD_BYTES * elements + 2 * mem["optimizer"]         # Step_AVX: grad read, states read and written
        if layout.offload_params == "none":                             # the updated partition back (fp32 at ZeRO 2)
            after = elements * (HOST_GRAD_BYTES if layout.zero < 3 else pol.weights)
            h2d += after
        out["gradients"] = out["optimizer"] = sympy.Integer(0)
    if layout.offload_params != "none":
        shard = mem["weights"] - gathered
        away[layout.offload_params] += shard
        h2d += 2 * shard                                                # fetched for forward and for backward
        out["weights"] = gathered
    f = layout.offload_activations
    if f:
        kept = f * in_flight * layer_activations
        out["activations"] = mem["activations"] - kept
        away["cpu"] += kept
        m = sympy.Integer(layout.m) if isinstance(layout.m, int) else layout.m
        d2h += f * m * layer_activations
        h2d += f * m * layer_activations
    out.update(host=away["cpu"], nvme=away["nvme"], host_link_d2h=d2h, host_link_h2d=h2d, host_link_after=after,
               cpu_step_bytes=cpu)
    return {k: sympy.expand(v) for k, v in out.items()}


def offload_seconds(memory: dict, hardware, *, devices_per_node=None) -> dict | None:
    """Seconds per step of one device's offload (``memory``: a stage's memory with
    :data:`OFFLOAD_KEYS` and :data:`TIMING_KEYS`) on ``hardware`` (a
    :class:`~costgraph.hardware.Hardware`), under :data:`SCHEDULE` (module docstring).

    Returns ``{"d2h", "h2d", "link", "after", "cpu_step", "serial"}``: the bytes moved beside the
    computation in each direction over ``host_link_bandwidth`` (B/s per direction; ``h2d`` less
    what comes back after the step), ``link`` = their max (the directions run at once: the busy
    time is at least this), ``after`` = the updated partition's bytes over the same bandwidth,
    ``cpu_step`` = ``cpu_step_bytes × devices_per_node / host_memory_bandwidth`` (the node's devices
    step at once and share it; 0 when the preset publishes no host-memory bandwidth), and
    ``serial`` = ``cpu_step + after`` (added to the step). ``devices_per_node``: the devices that
    share one host (default the preset's). None when the preset publishes no host-link bandwidth.
    """
    bw = getattr(hardware, "host_link_bandwidth", None)
    if bw is None:
        return None
    zero = sympy.Integer(0)
    after = memory.get("host_link_after", zero) / sympy.Integer(bw)
    d2h = memory["host_link_d2h"] / sympy.Integer(bw)
    h2d = memory["host_link_h2d"] / sympy.Integer(bw) - after
    cpu = zero
    host_bw = getattr(hardware, "host_memory_bandwidth", None)
    if host_bw is not None:
        n = hardware.devices_per_node if devices_per_node is None else devices_per_node
        cpu = memory.get("cpu_step_bytes", zero) * n / sympy.Integer(host_bw)
    link = sympy.Max(d2h, h2d) if d2h != h2d else d2h
    return {"d2h": d2h, "h2d": h2d, "link": link, "after": after, "cpu_step": cpu, "serial": cpu + after}


def node_bytes(per_device, devices_per_node: int) -> sympy.Expr:
    """Host (or NVMe) bytes of one node: ``per_device`` × the devices a node holds
    (the hardware preset's ``devices_per_node``; every device of a node alike)."""
    return sympy.expand(per_device * devices_per_node)


def offload_step_seconds(memory: dict, hardware, devices_per_node=None) -> dict | None:
    """The step-time parts of one device's offload (``memory``: a stage's memory with
    :data:`OFFLOAD_KEYS`): ``{"offload": link, "offload_serial": serial}`` of
    :func:`offload_seconds` — the host link beside the computation (the busy time is at least
    it) and what runs after the backward in series (the CPU optimizer step and the partition
    back) — or None without offload or without a published host-link bandwidth. The step-time
    model (:func:`costgraph.training.steptime.step_time`) adds them (``combine``)."""
    if "host_link_d2h" not in memory:
        return None
    seconds = offload_seconds(memory, hardware, devices_per_node=devices_per_node)
    return None if seconds is None else {"offload": seconds["link"], "offload_serial": seconds["serial"]}


def devices_sharing(layout, hardware) -> int:
    """The devices of one node that share its host: the preset's ``devices_per_node``, or the
    job's devices if fewer (an integer ``gpus``)."""
    n = hardware.devices_per_node
    return min(n, layout.gpus) if isinstance(layout.gpus, int) else n


def offload_section(memory, values, hardware=None):
    """A :class:`~costgraph.training.result_parts.TrainingOffload`: the offload figures of a :class:`~costgraph.training.memory.TrainingMemory`'s
    most-loaded device at ``values``: ``settings`` (the three layout fields),
    ``host``, ``nvme``, ``host_link_d2h``, ``host_link_h2d`` (bytes per device; per
    step for the link), and with a hardware preset ``devices_per_node`` (the
    preset's, or the job's GPUs if fewer),
    ``host_per_node``, ``nvme_per_node`` and ``seconds`` (:func:`offload_seconds`,
    None when the preset publishes no host-link bandwidth)."""
    L = memory.layout
    top = memory.most_loaded(values).memory
    out = TrainingOffload(settings=OffloadSettings(L.offload_optimizer, L.offload_params,
                                                   L.offload_activations or sympy.Integer(0)),
                          **{k: top[k] for k in OFFLOAD_KEYS})
    if hardware is not None:
        n = devices_sharing(L, hardware)
        out.devices_per_node, out.hardware = n, hardware.key
        out.host_per_node, out.nvme_per_node = node_bytes(top["host"], n), node_bytes(top["nvme"], n)
        seconds = offload_seconds(top, hardware, devices_per_node=n)
        out.seconds = None if seconds is None else OffloadSeconds(**seconds)
        out.host_memory_bandwidth = getattr(hardware, "host_memory_bandwidth", None)
    return out
