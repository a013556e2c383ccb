"""``costgraph infer`` of an encoder that reads no token ids (session 44 trial12): the refusal says what it is.

A drafted ViT, SigLIP tower, Swin or wav2vec2 (``costgraph import vit.json``; docs/import.md) marks K and V with
``cache(...)`` through std ``gqa_attention``, but its sequence is its patches or frames (``s = (image/p)^2 + 1``), read
from no token: there is no decode phase. ``infer`` refused it with the Python API's message ("was built without the key
axis split", hint "load it with costgraph.inference.load(...)"), which a command-line user cannot act on; it now says
that the model reads no token ids, exit status 2, as the bundled ``vit`` ("caches nothing").
"""

from __future__ import annotations

from costgraph.cli import main

#: the front of a ViT as ``costgraph import`` drafts it (transformers 5.24 modeling_vit.py ``ViTEmbeddings``: the patch
#: ``Conv2d``, flattened, the class token in front), one attention over the n + 1 positions
ENCODER = """import "std/attention.cg"

model enc {
  dim b "images"
  dim h "hidden size"
  dim a "attention heads"
  dim c "image channels"
  dim image "image size (pixels per side)"
  dim p "patch size (pixels per side)"
  dim s = (image / p) * (image / p) + 1 "the patches and the class token"

  input pixels[b, c, image, image]
  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = true, name = projection))
  param cls_token[1, 1, h]
  x = concat_seq(cls_token, x)
  return gqa_attention(x, a, a, h / a, rotary = false, name = attention)
}

config c { b = 1, h = 768, a = 12, c = 3, image = 224, p = 16 }
"""


def test_infer_refuses_an_encoder_of_no_token_ids(tmp_path, capsys):
    path = tmp_path / "enc.cg"
    path.write_text(ENCODER)
    code = main(["infer", str(path), "--config", "c", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == ("error: model 'enc' reads no token ids: an encoder of images or audio (ViT, wav2vec2) has no decode "
                   "phase to model\nhint: for its forward pass use derive or train\n")


#: the front of a Whisper-like speech encoder as ``costgraph import`` drafts it (drafting/mel_front.py; transformers 5.24
#: modeling_qwen2_audio.py ``Qwen2AudioEncoder``: a stride-2 Conv1d stem whose output adds the position table whole, so
#: that the frames are s = 2·se), one attention over the se positions
MEL_ENCODER = """import "std/attention.cg"

model mel_enc {
  dim b "audio clips"
  dim h "hidden size"
  dim a "attention heads"
  dim mel "log-Mel bins"
  dim se "encoder positions"
  dim s = 2 * se "spectrogram frames"

  input features[b, mel, s]
  x = gelu(dense_conv1d(features, h, kernel = 3, padding = 1, name = conv1))
  x = transpose(gelu(dense_conv1d(x, h, kernel = 3, stride = 2, padding = 1, name = conv2)))
  param embed_positions[se, h]
  x = x + embed_positions
  return gqa_attention(x, a, a, h / a, rotary = false, name = attention)
}

config c { b = 1, h = 1280, a = 20, mel = 128, se = 1500 }
"""


def test_infer_refuses_a_speech_encoder_whose_frames_follow_its_positions(tmp_path, capsys):
    """trial12: ``infer`` on a drafted Qwen2-Audio encoder said "no value for se" (its key axis, the stem's output
    se, is no token stream): it now refuses it as it does every encoder of no token ids, with or without --config."""
    path = tmp_path / "mel_enc.cg"
    path.write_text(MEL_ENCODER)
    for extra in ([], ["--config", "c"]):
        code = main(["infer", str(path), *extra, "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"])
        err = capsys.readouterr().err
        assert code == 2
        assert err.startswith("error: model 'mel_enc' reads no token ids: an encoder of images or audio")
