package model

import (
	"fmt"
	"strings"

	"github.com/commsim/commsim/hw"
)

// Device and utilisation assumed by the built-in profiles' compute times.
const (
	// H100BF16 is the dense BF16 Tensor Core peak of an NVIDIA H100 SXM5
	// in FLOP/s: the datasheet gives 1,979 TFLOPS "with sparsity", half of
	// it dense (NVIDIA H100 Tensor Core GPU datasheet).
	H100BF16 = 989e12
	// H100TF32 is the dense TF32 Tensor Core peak of an H100 SXM5 in FLOP/s
	// (datasheet: 989 TFLOPS with sparsity), used for f32 training with
	// TF32 matmuls.
	H100TF32 = 494e12
	// BuiltinMFU is the model FLOPs utilisation the built-ins assume: 40%.
	// It is an assumption, not a measurement (for scale: PaLM 540B
	// reports 46.2%, Chowdhery et al. 2022, arXiv:2204.02311).
	BuiltinMFU = 0.4
)

// Tokens per GPU per step that the built-ins assume.
const (
	GPT2SmallTokens = 8 * 1024 // 8 sequences of n_ctx 1024
	Llama7BTokens   = 2 * 2048 // 2 sequences of LLaMA's context, 2048
	Llama70BTokens  = 1 * 4096 // 1 sequence of Llama 2's context, 4096
)

// Sources shared by the built-ins.
const (
	srcKaplan = "Compute: forward FLOPs = 2·params·tokens per layer, backward = 2× forward " +
		"(Kaplan et al. 2020, Scaling Laws for Neural Language Models, arXiv:2001.08361, §2.1); " +
		"attention-score FLOPs (2·n_layer·n_ctx·d per token) left out"
	srcLookup  = "Embedding layers: a table lookup, compute taken as 0; their params still count"
	srcH100    = "Device: NVIDIA H100 SXM5, dense BF16 989 TFLOP/s, dense TF32 494 TFLOP/s (NVIDIA H100 Tensor Core GPU datasheet; half the 'with sparsity' figures)"
	srcMFU     = "MFU 40%: an assumption (PaLM, Chowdhery et al. 2022, arXiv:2204.02311, reports 46.2%)"
	srcTime    = "time = FLOPs / (peak × MFU): model.FLOPsTimes"
	gpt2Blocks = 12
)

var builtinNames = []string{"gpt2-small", "llama-7b", "llama-70b"}

// Builtins returns the names of the built-in profiles, in a fixed order. The
// slice is new on every call.
func Builtins() []string { return append([]string(nil), builtinNames...) }

// Builtin returns a new copy of the built-in profile name; see Builtins.
func Builtin(name string) (*Profile, error) {
	var p *Profile
	switch name {
	case "gpt2-small":
		p = gpt2Small()
	case "llama-7b":
		p = llama7B()
	case "llama-70b":
		p = llama70B()
	default:
		return nil, fmt.Errorf("model: unknown built-in profile %q (built-ins: %s)", name, strings.Join(builtinNames, ", "))
	}
	return p, nil
}

// layer builds a layer with times from FLOPsTimes(flopParams, …): the
// params whose matmuls the layer runs, which is not always its own Params.
func layer(name string, params, flopParams, tokens int64, dt hw.DType, peak float64, sharded bool) Layer {
	fwd, bwd := FLOPsTimes(flopParams, tokens, peak, BuiltinMFU)
	return Layer{Name: name, Params: params, DType: dt, Forward: fwd, Backward: bwd, Sharded: sharded}
}

// gpt2Small is GPT-2 small: Radford et al. 2019 and the Hugging Face config
// of openai-community/gpt2: n_layer 12, n_embd 768, n_head 12, vocab 50257,
// n_ctx (n_positions) 1024. The paper's Table 2 calls it 117M; the released
// weights hold 124,439,808 parameters, which is what this counts:
//
//	embed   wte 50257·768 + wpe 1024·768           = 39,383,808
//	h0…h11  12·768² + 13·768 each                  =  7,087,872 each
//	          attention c_attn 768×2304 + bias 2304,
//	          c_proj 768×768 + bias 768            = 4·768² + 4·768
//	          MLP c_fc 768×3072 + bias 3072,
//	          c_proj 3072×768 + bias 768           = 8·768² + 5·768
//	          ln_1, ln_2: weight and bias          = 4·768
//	ln_f+lm_head  ln_f weight and bias             = 1,536
//	total                                          = 124,439,808
//
// The output head is tied to wte (no params of its own) but is a real
// matmul of 50257·768 weights, so its compute goes on the last layer
// (FLOPs of 50257·768 + 1536 params), where it runs: first in backward. The
// tied gradient is complete only when the embedding's backward is, so it
// stays with embed, last. f32 gradients, TF32 matmuls, 8 sequences of 1024
// tokens per GPU.
func gpt2Small() *Profile {
	const (
		d, vocab, ctx = 768, 50257, 1024
		embed         = vocab*d + ctx*d        // 39,383,808
		block         = 12*d*d + 13*d          // 7,087,872
		lnF           = 2 * d                  // 1,536
		head          = vocab * d              // tied to wte: compute only
		tok           = int64(GPT2SmallTokens) // 8192
	)
	p := &Profile{Name: "gpt2-small", Sources: []string{
		"Architecture: GPT-2 small, n_layer 12, n_embd 768, vocab 50257, n_ctx 1024 " +
			"(Radford et al. 2019, Language Models are Unsupervised Multitask Learners; " +
			"Hugging Face openai-community/gpt2 config.json); 124,439,808 params with the output head tied to wte",
		"Block params: attention 4·768²+4·768, MLP 8·768²+5·768, two layernorms 4·768 = 12·768²+13·768 = 7,087,872",
		"Tokens per GPU per step: 8 sequences × 1024 = 8192 (assumption)",
		"Layer ln_f+lm_head: ln_f's 1,536 params, compute of ln_f plus the tied 50257×768 output matmul",
		"Gradients f32; matmuls in TF32 at 494 TFLOP/s",
		srcKaplan, srcLookup, srcH100, srcMFU, srcTime,
	}}
	p.Layers = append(p.Layers, Layer{Name: "embed", Params: embed, DType: hw.F32}) // lookup: compute 0
	for i := range gpt2Blocks {
		p.Layers = append(p.Layers, layer(fmt.Sprintf("h%d", i), block, block, tok, hw.F32, H100TF32, false))
	}
	p.Layers = append(p.Layers, layer("ln_f+lm_head", lnF, lnF+head, tok, hw.F32, H100TF32, false))
	return p
}

// llama7B is LLaMA-7B: Touvron et al. 2023, LLaMA: Open and Efficient
// Foundation Language Models (arXiv:2302.13971), Table 2: dim 4096, 32
// layers, 32 heads; FFN hidden 11008 (2/3·4·4096 rounded up to a multiple
// of 256: §2.2 and the released params / Hugging Face config); vocab 32000
// (SentencePiece BPE, §2.1; the size from the config):
//
//	embed     32000·4096                            =   131,072,000
//	layer0…31 attention wq wk wv wo 4·4096²,
//	          SwiGLU w1 w2 w3 3·4096·11008,
//	          attention_norm and ffn_norm 2·4096    =   202,383,360 each
//	norm+lm_head  final RMSNorm 4096
//	          + output head 32000·4096 (untied)     =   131,076,096
//	total                                           = 6,738,415,616
//
// bf16 gradients, 2 sequences of LLaMA's 2048-token context per GPU.
func llama7B() *Profile {
	const (
		d, ffn, vocab = 4096, 11008, 32000
		embed         = vocab * d
		block         = 4*d*d + 3*d*ffn + 2*d
		tok           = int64(Llama7BTokens)
	)
	p := &Profile{Name: "llama-7b", Sources: []string{
		"Architecture: LLaMA-7B, dim 4096, 32 layers, 32 heads (Touvron et al. 2023, arXiv:2302.13971, Table 2); " +
			"FFN hidden 11008 and vocab 32000 (released params, Hugging Face LLaMA-7B config.json); 6,738,415,616 params",
		"Block params: attention 4·4096², SwiGLU MLP 3·4096·11008, two RMSNorms 2·4096 = 202,383,360",
		"Embedding 32000×4096 and output head 32000×4096, untied; final RMSNorm 4096, one layer with the head",
		"Tokens per GPU per step: 2 sequences × 2048 (LLaMA's context) = 4096 (assumption)",
		"Gradients bf16; matmuls in BF16 at 989 TFLOP/s",
		srcKaplan, srcLookup, srcH100, srcMFU, srcTime,
	}}
	p.Layers = llamaLayers(embed, block, d, 32, tok, false)
	return p
}

// llama70B is Llama 2 70B: Touvron et al. 2023b, Llama 2: Open Foundation
// and Fine-Tuned Chat Models (arXiv:2307.09288), Table 1 (4k context,
// grouped-query attention for 70B) and the Hugging Face meta-llama/Llama-2-70b-hf
// config: hidden 8192, 80 layers, 64 heads of 128 with 8 KV heads (so K and
// V project 8192→1024), FFN hidden 28672, vocab 32000:
//
//	embed     32000·8192                            =    262,144,000
//	layer0…79 wq wo 2·8192², wk wv 2·8192·1024,
//	          SwiGLU 3·8192·28672, two RMSNorms 2·8192 =   855,654,400 each
//	norm+lm_head  final RMSNorm 8192
//	          + output head 32000·8192 (untied)     =    262,152,192
//	total                                           = 68,976,648,192
//
// Every layer is Sharded (ZeRO-3 / FSDP full sharding, the usual way to
// train 70B). bf16 gradients, 1 sequence of 4096 tokens per GPU.
func llama70B() *Profile {
	const (
		d, kv, ffn, vocab = 8192, 8 * 128, 28672, 32000
		embed             = vocab * d
		block             = 2*d*d + 2*d*kv + 3*d*ffn + 2*d
		tok               = int64(Llama70BTokens)
	)
	p := &Profile{Name: "llama-70b", Sources: []string{
		"Architecture: Llama 2 70B, hidden 8192, 80 layers, 64 heads, GQA with 8 KV heads of 128, FFN hidden 28672, vocab 32000 " +
			"(Touvron et al. 2023b, arXiv:2307.09288, Table 1; Hugging Face meta-llama/Llama-2-70b-hf config.json); 68,976,648,192 params",
		"Block params: Q and O 2·8192², K and V 2·8192·1024, SwiGLU MLP 3·8192·28672, two RMSNorms 2·8192 = 855,654,400",
		"Embedding 32000×8192 and output head 32000×8192, untied; final RMSNorm 8192, one layer with the head",
		"Every layer sharded: ZeRO-3 / FSDP full sharding (assumption)",
		"Tokens per GPU per step: 1 sequence of Llama 2's context, 4096 (assumption)",
		"Gradients bf16; matmuls in BF16 at 989 TFLOP/s",
		srcKaplan, srcLookup, srcH100, srcMFU, srcTime,
	}}
	p.Layers = llamaLayers(embed, block, d, 80, tok, true)
	return p
}

// llamaLayers lays out a LLaMA-style model in n+2 layers: embed (a lookup:
// compute 0), n blocks, and norm+lm_head: the final RMSNorm (d params) with
// the untied output head (as large as embed, a matmul), whose gradients are
// ready together, first in backward. Its FLOPs follow the same rule over
// all its params (the norm's share is tiny).
func llamaLayers(embed, block, d int64, n int, tok int64, sharded bool) []Layer {
	ls := make([]Layer, 0, n+2)
	ls = append(ls, Layer{Name: "embed", Params: embed, DType: hw.BF16, Sharded: sharded})
	for i := range n {
		ls = append(ls, layer(fmt.Sprintf("layer%d", i), block, block, tok, hw.BF16, H100BF16, sharded))
	}
	ls = append(ls, layer("norm+lm_head", d+embed, d+embed, tok, hw.BF16, H100BF16, sharded))
	return ls
}
