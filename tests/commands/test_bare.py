"""`costgraph train --params N` (costgraph/commands/_bare.py): the device memory its states are checked
against is read as train with a model reads it, under --memory-convention (default cuda: 79.22 GiB on an
H100 SXM, runtime_memory.toml [visible.h100-sxm]), less a --reserve fraction or size (trial 8: the bare
form read the printed 80 GB and ignored both flags)."""

import json

import pytest

from costgraph.cli import main
from tests.device_memory import H100_SXM_CUDA

CUDA_H100 = H100_SXM_CUDA   # tests/device_memory.py: runtime_memory.toml [visible.h100-sxm]
BARE = ["train", "--params", "7.5e9", "--gpus", "8", "--zero", "3", "--hardware", "h100-sxm"]


def _fits(capsys, *extra):
    assert main([*BARE, *extra, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["fits"]


def test_bare_reads_the_memory_convention(capsys):
    assert _fits(capsys)["capacity_bytes"] == CUDA_H100
    assert "memory convention cuda" in _fits(capsys)["capacity_from"]
    nominal = _fits(capsys, "--memory-convention", "nominal")
    assert nominal["capacity_bytes"] == 80 * 10**9 and "nominal" in nominal["capacity_from"]
    given = _fits(capsys, "--memory", "80GB")
    assert given == {"capacity_bytes": 80 * 10**9, "fits": True}   # --memory wins: no preset figure named
    assert main([*BARE, "--memory", "80GB", "--memory-convention", "nominal"]) == 2
    assert "--memory-convention nominal reads a preset's memory" in capsys.readouterr().err


@pytest.mark.parametrize("reserve, held", [("0.1", -(-CUDA_H100 // 10)), ("8GB", 8 * 10**9), ("8_000MB", 8 * 10**9)])
def test_bare_keeps_the_reserve_free(capsys, reserve, held):
    assert _fits(capsys, "--reserve", reserve)["reserve_bytes"] == held
    assert main([*BARE, "--reserve", reserve]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("device memory"))
    assert f"less a reserve of {held:,} bytes" in line and line.endswith(": fits")
    # 120 GB of states at ZeRO 0 on 8 devices: no reserve makes them fit; 14 GB at ZeRO 3 with 72 GB kept free does not
    assert main([*BARE[:-4], "--hardware", "h100-sxm", "--zero", "3", "--reserve", "72GB"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("does NOT fit")


def test_bare_fits_document_validates(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    from referencing import Registry, Resource

    from costgraph.export import schema as schemas

    doc = schemas.bundled("train")
    validator = jsonschema.Draft202012Validator(
        doc, registry=Registry().with_resource(doc["$id"], Resource.from_contents(doc)).crawl())
    assert main([*BARE, "--reserve", "0.1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["fits"]) == {"capacity_bytes", "fits", "capacity_from", "reserve_bytes"}
    assert [e.message for e in validator.iter_errors(out)] == []
