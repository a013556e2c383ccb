"""``costgraph plan``'s text (:mod:`costgraph.export.plan_report`): the header names the given settings
(:data:`costgraph.layout_options.GIVEN`) from their declarations (each field's ``label``, flag, ``named``), not a
phrase written per setting (the --cross-entropy plan passed to every row was named nowhere in the text)."""

from __future__ import annotations

import pytest

import costgraph
from costgraph.layout_options import GIVEN, LayoutOptions, given_phrases
from costgraph.option_fields import specs


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2", s=1024)


def test_every_given_setting_declares_how_it_is_named():
    fields = specs(LayoutOptions)
    assert GIVEN == ("cross_entropy", "link_rate", "ep_dispatcher", "attention_kernel", "cp_comm_type", "gemm_rate",
                     "overlap_contention", "zero3_gathered")
    assert all(fields[k][1].label and fields[k][1].named in ("changed", "always") for k in GIVEN)
    # at the defaults: the three named always, with "(default)"; the others left out
    always = {"overlap_contention": "contention --overlap-contention sm-share (default)"}
    assert given_phrases({}) == {"link_rate": "links at --link-rate nccl (default)",
                                 "gemm_rate": "GEMM rate --gemm-rate sustained (default)", **always}
    assert given_phrases({"cross_entropy": "te", "cp_comm_type": "all_gather", "zero3_gathered": "fsdp2"}) == {
        "cross_entropy": "loss --cross-entropy te", "link_rate": "links at --link-rate nccl (default)",
        "cp_comm_type": "CP --cp-comm-type all_gather", "gemm_rate": "GEMM rate --gemm-rate sustained (default)",
        **always, "zero3_gathered": "ZeRO-3 gathered --zero3-gathered fsdp2"}


@pytest.mark.parametrize("given, compute, tail", [
    ({}, "GEMM rate --gemm-rate sustained (default))", "overlap megatron (default), links at --link-rate nccl (default), "
     "contention --overlap-contention sm-share (default))"),
    ({"cross_entropy": "te", "link_rate": "line", "ep_dispatcher": "deepep", "attention_kernel": "fa2",
      "cp_comm_type": "all_gather", "gemm_rate": "isolated"}, "GEMM rate --gemm-rate isolated)",
     "overlap megatron (default), loss --cross-entropy te, links at --link-rate line, EP dispatch --ep-dispatcher "
     "deepep, attention kernel --attention-kernel fa2, CP --cp-comm-type all_gather, contention --overlap-contention "
     "sm-share (default))"),
], ids=["defaults", "every-given"])
def test_the_header_names_the_given_settings_in_their_declared_order(gpt, given, compute, tail):
    m, values = gpt
    lines = m.plan(values, gpus=4, hardware="h100-sxm", global_batch=8, top=1, **given).to_text().splitlines()
    assert lines[0].endswith("; compute by the per-kernel time model (kernels.toml [h100-sxm]; " + compute)
    assert lines[1].endswith("exposed communication + contention, " + tail)
