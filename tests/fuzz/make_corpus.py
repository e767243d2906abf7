#!/usr/bin/env python3
"""Writes the fuzz seeds that independent writers can make (docs/FUZZING.md).

GGUF files come from gguf-py (the gguf package llama.cpp ships), .npy/.npz from NumPy, the rest
(llama2.c checkpoints and tokenizers, Hugging Face config.json, sweep plans) from the standard
library. make_corpus.cpp writes the formats whose writer is kvlab's own. Run it with the Python of
scripts/test_data.sh's environment, which has both packages:

    ~/.cache/kvlab/venv/bin/python tests/fuzz/make_corpus.py tests/fuzz/corpus
"""
import json
import shutil
import struct
import sys
from pathlib import Path

import gguf
import numpy as np

RNG = np.random.default_rng(42)
Q = gguf.GGMLQuantizationType


def rand(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def tensor(writer, name, values, qtype=Q.F32):
    """Adds `values` ([rows, cols] as NumPy holds it; GGUF's dims are {cols, rows}) as `qtype`."""
    if qtype == Q.F32:
        writer.add_tensor(name, values)
    elif qtype == Q.F16:
        writer.add_tensor(name, values.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)


def write_gguf(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_llama(path):
    """A one-layer Llama (dim 32, 4 heads, 2 KV heads) with a SentencePiece vocabulary of 260:
    control tokens, the 256 byte pieces and one word, and weights of seven ggml types."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("fuzz-llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(8)
    w.add_file_type(7)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581Hi"]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-1.0])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    tensor(w, "token_embd.weight", rand(260, 32), Q.Q8_0)
    tensor(w, "output_norm.weight", np.ones(32, np.float32))
    tensor(w, "blk.0.attn_norm.weight", np.ones(32, np.float32))
    tensor(w, "blk.0.attn_q.weight", rand(32, 32), Q.F16)
    tensor(w, "blk.0.attn_k.weight", rand(16, 32), Q.Q4_0)
    tensor(w, "blk.0.attn_v.weight", rand(16, 32), Q.Q5_1)
    tensor(w, "blk.0.attn_output.weight", rand(32, 32), Q.Q4_1)
    tensor(w, "blk.0.ffn_norm.weight", np.ones(32, np.float32))
    tensor(w, "blk.0.ffn_gate.weight", rand(64, 32), Q.Q5_0)
    tensor(w, "blk.0.ffn_up.weight", rand(64, 32), Q.BF16)
    tensor(w, "blk.0.ffn_down.weight", rand(32, 64), Q.Q8_0)
    write_gguf(w)


def byte_level_alphabet():
    """GPT-2's bytes_to_unicode: the printable character standing for each byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def gguf_qwen2(path):
    """A one-layer Qwen2 (dim 16, q/k/v biases, NeoX RoPE) with a byte-level BPE vocabulary."""
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(1)
    w.add_context_length(32)
    w.add_embedding_length(16)
    w.add_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    tokens = byte_level_alphabet() + ["\u0120t", "he", "\u0120the", "<|endoftext|>"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * 259 + [3])
    w.add_token_merges(["\u0120 t", "h e", "\u0120t he"])
    w.add_bos_token_id(259)
    w.add_eos_token_id(259)
    tensor(w, "token_embd.weight", rand(260, 16), Q.F16)
    tensor(w, "output.weight", rand(260, 16), Q.BF16)
    tensor(w, "output_norm.weight", np.ones(16, np.float32))
    tensor(w, "blk.0.attn_norm.weight", np.ones(16, np.float32))
    for name, rows in (("q", 16), ("k", 8), ("v", 8)):
        tensor(w, f"blk.0.attn_{name}.weight", rand(rows, 16))
        tensor(w, f"blk.0.attn_{name}.bias", rand(rows))
    tensor(w, "blk.0.attn_output.weight", rand(16, 16))
    tensor(w, "blk.0.ffn_norm.weight", np.ones(16, np.float32))
    tensor(w, "blk.0.ffn_gate.weight", rand(32, 16), Q.F16)
    tensor(w, "blk.0.ffn_up.weight", rand(32, 16), Q.F16)
    tensor(w, "blk.0.ffn_down.weight", rand(16, 32), Q.F16)
    write_gguf(w)


def gguf_every_type(path):
    """Metadata of every value type (arrays of each) and one 256-value tensor of every ggml type
    gguf-py knows, its blocks random bytes."""
    w = gguf.GGUFWriter(str(path), "fuzz")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.string", "caf\u00e9")
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float64("t.f64", -2.25)
    w.add_array("t.array.ints", [1, 2, 3])
    w.add_array("t.array.floats", [0.5, -1.0])
    w.add_array("t.array.strings", ["a", "", "b\u00e9"])
    w.add_array("t.array.bools", [True, False])
    w.add_array("t.array.empty", [])
    for qtype in Q:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = RNG.integers(0, 256, size=(1, size * (256 // block)), dtype=np.uint8)
        w.add_tensor(f"t.{qtype.name.lower()}", raw, raw_dtype=qtype)
    write_gguf(w)


def gguf_seeds(out):
    gguf_llama(out / "llama-q8_0-mixed.gguf")
    gguf_qwen2(out / "qwen2-bpe-bias.gguf")
    gguf_every_type(out / "every-type.gguf")
    nested = gguf.GGUFWriter(str(out / "nested-array.gguf"), "fuzz")
    nested.add_array("t.array.nested", [[1, 2], [3]])  # gguf-py writes it; ggml refuses it
    write_gguf(nested)
    v2 = bytearray((out / "qwen2-bpe-bias.gguf").read_bytes())
    v2[4:8] = struct.pack("<I", 2)  # version 2: the same layout as 3
    (out / "qwen2-version2.gguf").write_bytes(bytes(v2))


def kv_arrays(layers, tokens, heads, dim, dtype):
    return [(rand(tokens, heads, dim).astype(dtype), rand(tokens, heads, dim).astype(dtype))
            for _ in range(layers)]


def npy_seeds(out):
    """One array [layers, 2, tokens, kv_heads, head_dim]: f16, f32, bf16 bits as u2, version 2."""
    np.save(out / "f16-2x2x3x2x4.npy", rand(2, 2, 3, 2, 4).astype(np.float16))
    np.save(out / "f32-1x2x5x1x8.npy", rand(1, 2, 5, 1, 8))
    bf16 = (rand(2, 2, 2, 1, 4).view(np.uint32) >> 16).astype(np.uint16)
    np.save(out / "bf16-as-u2.npy", bf16)
    with open(out / "f16-version2.npy", "wb") as f:
        np.lib.format.write_array(f, rand(1, 2, 2, 2, 4).astype(np.float16), version=(2, 0))


def npz_seeds(out):
    """layers.{i}.key/value(/query).npy members, stored (np.savez) and deflated."""
    def members(layers, dtype, queries=False):
        m = {}
        for i, (k, v) in enumerate(kv_arrays(layers, 3, 2, 4, dtype)):
            m[f"layers.{i}.key"], m[f"layers.{i}.value"] = k, v
            if queries:
                m[f"layers.{i}.query"] = rand(2, 4, 4).astype(dtype)
        return m
    np.savez(out / "stored-f16.npz", **members(2, np.float16))
    np.savez_compressed(out / "deflated-f32-queries.npz", **members(1, np.float32, True))
    np.savez(out / "stored-u2.npz", **{k: v.view(np.uint16)
                                       for k, v in members(1, np.float16).items()})


def llama2c_checkpoint(path, dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared):
    """Karpathy's legacy_export: seven int32, then float32 weights (llama2c_loader.cpp's order)."""
    head = dim // heads
    kv = kv_heads * head
    n = (vocab * dim + layers * dim + layers * dim * dim + 2 * layers * kv * dim
         + layers * dim * dim + layers * dim + 3 * layers * hidden * dim + dim
         + seq_len * head + (0 if shared else vocab * dim))
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads,
                         vocab if shared else -vocab, seq_len)
    path.write_bytes(header + (rand(n) * 0.2).tobytes())


def llama2c_seeds(out):
    llama2c_checkpoint(out / "gqa-shared-32vocab.bin", 8, 16, 1, 2, 1, 32, 8, True)
    llama2c_checkpoint(out / "mha-2layers-unshared.bin", 8, 12, 2, 2, 2, 24, 4, False)


def tokenizer_seeds(out, models):
    """tok512.bin of stories260K (6 KB), and one of 32 pieces written here."""
    real = models / "stories260K" / "tok512.bin"
    if real.exists():
        shutil.copyfile(real, out / "tok512.bin")
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [bytes([c]) for c in b" abcdehilnorstuw"]
    pieces += [b"\xe2\x96\x81", b"<0x41>", b" a", b" the", b"he", b"th", b"in", b"er", b"on",
               b"\xc3\xa9", b"an", b"re", b"at"]
    data = struct.pack("<i", max(len(p) for p in pieces))
    for i, p in enumerate(pieces[:32]):
        data += struct.pack("<fi", -float(i), len(p)) + p
    (out / "tiny32.bin").write_bytes(data)


HF_CONFIGS = {
    "llama-3.1-8b.json": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
        "rope_theta": 500000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
    "mistral-7b.json": {
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 32768, "sliding_window": 4096, "vocab_size": 32000,
        "torch_dtype": "bfloat16"},
    "qwen2.5-7b.json": {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "max_position_embeddings": 32768, "sliding_window": 131072,
        "use_sliding_window": False, "max_window_layers": 28, "vocab_size": 152064,
        "torch_dtype": "bfloat16"},
    "gemma3-4b.json": {
        "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
            "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
            "max_position_embeddings": 131072, "vocab_size": 262208},
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
        "torch_dtype": "bfloat16"},
    "deepseek-v3.json": {
        "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "first_k_dense_replace": 3, "moe_layer_freq": 1, "max_position_embeddings": 163840,
        "vocab_size": 129280, "torch_dtype": "bfloat16"},
    "gpt-oss-20b.json": {
        "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
        "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 64, "sliding_window": 128, "num_local_experts": 32,
        "num_experts_per_tok": 4, "max_position_embeddings": 131072, "vocab_size": 201088,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "torch_dtype": "bfloat16"},
    "qwen3-30b-a3b.json": {
        "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
        "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
        "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "max_position_embeddings": 40960, "vocab_size": 151936, "sliding_window": None,
        "torch_dtype": "bfloat16"},
    "qwen3-next-80b.json": {
        "model_type": "qwen3_next", "hidden_size": 2048, "intermediate_size": 5120,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256, "full_attention_interval": 4, "num_experts": 512,
        "num_experts_per_tok": 10, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "max_position_embeddings": 262144, "vocab_size": 151936, "torch_dtype": "bfloat16"},
    "llama4-scout.json": {
        "model_type": "llama4", "text_config": {
            "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192, "no_rope_layers": [],
            "max_position_embeddings": 10485760, "vocab_size": 202048},
        "torch_dtype": "bfloat16"},
}

SWEEPS = {
    "quality.json": {
        "kind": "quality", "models": ["a.gguf", "dir/b.bin"],
        "texts": ["/usr/share/common-licenses/GPL-3", "sampled:256"], "max_tokens": 512,
        "window": 128,
        "methods": [{"method": "int8"},
                    {"method": "kivi", "bits": 4, "group_size": 32, "residual": 64},
                    {"eviction": {"policy": "h2o", "budget": 0.5}},
                    {"method": "int4",
                     "eviction": {"policy": "streaming", "budget": "25%", "sinks": 4}}]},
    "compression.json": {
        "kind": "compression", "sources": ["synthetic:tiny", "file:kv.safetensors"],
        "context": 96, "layers": 2, "seed": 7, "queries": 4,
        "methods": [{"method": "int8"},
                    {"method": "kvcomp", "rel_scale": 0.1, "codec": "huffman"}]},
}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py CORPUS_DIR")
    root = Path(sys.argv[1])
    models = Path(__file__).resolve().parents[3] / "shared" / "models"
    dirs = {name: root / name for name in
            ("gguf", "npy", "npz", "llama2c", "llama2c_tokenizer", "hf_config", "sweep_plan")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    gguf_seeds(dirs["gguf"])
    npy_seeds(dirs["npy"])
    npz_seeds(dirs["npz"])
    llama2c_seeds(dirs["llama2c"])
    tokenizer_seeds(dirs["llama2c_tokenizer"], models)
    for name, config in HF_CONFIGS.items():
        (dirs["hf_config"] / name).write_text(json.dumps(config, indent=1) + "\n")
    for name, sweep in SWEEPS.items():
        (dirs["sweep_plan"] / name).write_text(json.dumps(sweep, indent=1) + "\n")
    # A sweep with the comments load_sweep_file accepts.
    (dirs["sweep_plan"] / "with-comments.json").write_text(
        '// a sweep file may carry comments\n{"kind": "quality", /* one model */\n'
        ' "models": ["m.gguf"], "texts": ["sampled:64"],\n'
        ' "methods": [{"method": "kvcomp", "rel_scale": 0.05, "codec": "varwidth"}]}\n')
    for name, d in sorted(dirs.items()):
        files = sorted(p for p in d.iterdir() if p.is_file())
        print(f"{name}: {len(files)} files, {sum(p.stat().st_size for p in files)} bytes")


if __name__ == "__main__":
    main()
