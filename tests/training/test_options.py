"""The training options' search domains (costgraph.options): Megatron's chunk layout texts the
planner tries where no even interleaved split exists (issue 27 item 3)."""

from costgraph.options import Space, chunk_layout, chunk_layouts
from costgraph.parallel.pipeline_layout import parse_pipeline_layout

#: DeepSeek-V3: 61 Transformer layers and one MTP depth (Space.layers counts the MTP group too)
DSV3 = Space(gpus=1024, max_tp=8, layers=62, stacks=3, mtp=1)


def _stages(text: str, pp: int) -> list[str]:
    return list(parse_pipeline_layout(text, pp).stages)


def test_chunk_layouts_are_megatron_bridges_deepseek_v3_layouts():
    # Megatron-Bridge 067f987 src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py::
    # _get_deepseek_v3_pipeline_layout, the entries with v > 1, written as Bridge builds the lists
    last = "mL"
    bridge = {
        (4, 2): ["E" + "t" * 8] + ["t" * 8] * 6 + ["t" * 5 + last],
        (8, 2): ["E" + "t" * 4] + ["t" * 4] * 14 + ["t" + last],
        (4, 4): ["E" + "t" * 4] + ["t" * 4] * 14 + ["t" + last],
    }
    for (pp, vp), stages in bridge.items():
        got = dict(chunk_layouts(DSV3, pp))
        assert _stages(got[vp], pp) == stages, (pp, vp)
    # perf_recipes/deepseek/h100/deepseek_v3.py (PP 8 x VP 4, not in the map):
    # set_deepseek_v3_pipeline_model_parallel_layout(cfg.model, "Et|(tt|)*30mL")
    assert _stages(dict(chunk_layouts(DSV3, 8))[4], 8) == _stages("Et|(tt|)*30mL", 8)
    # the map's v = 1 entries follow the same rule over p chunks (v = 1 is the first/last split's domain,
    # so chunk_layouts starts at v = 2)
    for pp, stages in {4: ["E" + "t" * 16, "t" * 16, "t" * 16, "t" * 13 + last],
                       8: ["E" + "t" * 8] + ["t" * 8] * 6 + ["t" * 5 + last],
                       16: ["E" + "t" * 4] + ["t" * 4] * 14 + ["t" + last]}.items():
        assert _stages(chunk_layout(61, pp, 1), pp) == stages
    # every text checks against the model
    for p in (2, 4, 8, 16):
        for v, text in chunk_layouts(DSV3, p):
            lay = parse_pipeline_layout(text, p)
            assert lay.vp == v and 61 % (p * v) != 0
            lay.validate(61, 1)


def test_chunk_layouts_only_where_no_even_split_exists():
    # 32 layers (Llama-3-8B): v = 2 on PP 4 divides them (the v domain's), v = 3 does not
    llama = Space(gpus=8, max_tp=8, layers=32)
    got = dict(chunk_layouts(llama, 4))
    assert 2 not in got and 4 not in got and 8 not in got
    # N = 12 chunks: q = ceil(32/12) = 3, r = 32 - 10*3 = 2: first chunk E + 2, last chunk the loss alone
    assert _stages(got[3], 4) == ["Ett"] + ["ttt"] * 10 + ["L"]
    assert chunk_layouts(llama, 1) == ()
    # more chunks than the layers fill (r < 0): none; p = 16, v = 2 (32 chunks of 61) is one
    assert 3 not in dict(chunk_layouts(DSV3, 16)) and 2 in dict(chunk_layouts(DSV3, 16))


def test_the_search_space_is_generated_from_the_layout_fields():
    # issue 27 item 2: every searched setting is one LayoutOptions field whose Domain the planner reads (its key,
    # flag, default and kind), and only the micro-batch b (a dimension of the model) is declared here
    from costgraph.layout_options import LayoutOptions
    from costgraph.option_fields import specs
    from costgraph.options import BY_FIELD, KINDS, NOT_FIELDS, TRAIN_OPTIONS

    declared = {s.domain.key or n: (f, s) for n, (f, s) in specs(LayoutOptions).items() if s.domain is not None}
    assert [o.field for o in NOT_FIELDS] == ["b"] and set(BY_FIELD) == set(declared) | {"b"}
    for key, (f, s) in declared.items():
        o = BY_FIELD[key]
        assert (o.flag, o.default, o.kind, o.not_searched) == (s.domain.flag or s.flag, f.default, s.domain.kind,
                                                               s.domain.not_searched), key
    kinds = [KINDS.index(o.kind) for o in TRAIN_OPTIONS]
    assert kinds == sorted(kinds)


def test_recompute_policies_are_the_frameworks():
    # plan's --overlap names the framework whose policies are searched (choices.RECOMPUTE_BY_OVERLAP): Megatron-LM's
    # --recompute-granularity (Megatron-LM @ d98e8a64 arguments.py: selective or full, or none), torchtitan's
    # activation_checkpoint.mode (@ 9dec370 parallelize_llama.py _apply_ac_to_transformer_block: full or selective,
    # per-op SAC as its llama3 train configs set it, or none); selective is not searched under flash (the kernel
    # recomputes the core itself)
    from costgraph.options import recompute_policies

    got = {(o, a): recompute_policies(Space(gpus=8, max_tp=8, layers=8, attention=a, overlap=o))
           for o in ("megatron", "torchtitan", "none") for a in ("flash", "eager")}
    assert got == {("megatron", "flash"): ("none", "full"), ("megatron", "eager"): ("none", "selective", "full"),
                   ("torchtitan", "flash"): ("none", "full", "torchtitan-op"),
                   ("torchtitan", "eager"): ("none", "full", "torchtitan-op"),
                   ("none", "flash"): ("none", "full", "torchtitan-op"),
                   ("none", "eager"): ("none", "selective", "full", "torchtitan-op")}


def test_chunk_layouts_reach_llama3_405bs_one_layer_chunks():
    # the Llama 3 paper (arXiv 2407.21783 §3.3.2): 126 layers over PP 16, one layer less on the first and the last
    # stage, "the first model chunk on the first stage has only the embedding, and the last model chunk on the last
    # stage has only output projection and loss calculation": one layer a chunk, 128 chunks, V = 8
    llama405 = Space(gpus=8192, max_tp=8, layers=126)
    got = dict(chunk_layouts(llama405, 16))
    assert max(got) == 8 and _stages(got[8], 16) == ["E"] + ["t"] * 126 + ["L"]
    parse_pipeline_layout(got[8], 16).validate(126, 0)
    # V = 2 (q = 4, r = 6) and 4 (q = 2, r = 2) as before; V = 3, 5, 6, 7 leave r < 0 (V = 7: 112 chunks,
    # q = 2, r = 126 − 110·2): none
    assert sorted(got) == [2, 4, 8]
    # with MTP depths the loss's chunk holds them: DeepSeek-V3 (61 + 1) over PP 2: up to 63 chunks, V = 31 (62 chunks)
    # has the embedding with one layer and the MTP depth with the loss: "Et|(t|)*59tmL"
    assert _stages(dict(chunk_layouts(DSV3, 2))[31], 2) == ["Et"] + ["t"] * 60 + ["mL"]
