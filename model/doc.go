// Package model describes neural-network models the way a data-parallel
// training step sees them: a list of layers, each with a parameter count, a
// gradient dtype, forward and backward compute times on one GPU, and whether
// its parameters are sharded. commsim train simulates one step of such a
// Profile; param sync (ops) turns its gradients into buckets.
//
// # The model of a step
//
// Every GPU holds a replica of the model (or, for Sharded layers, a 1/p
// shard of its parameters) and its own micro-batch of tokens. One step is:
//
//  1. Forward: the layers run in order, Layers[0] first, each taking
//     Forward seconds. A Sharded layer's parameters are all-gathered
//     before it runs (ZeRO-3 / FSDP), which can overlap the layers before.
//  2. Backward: the layers run in reverse, Layers[len-1] first, each taking
//     Backward seconds. When a layer's backward ends its gradients
//     (Params elements of DType) are ready.
//  3. Gradient sync: ready gradients are packed into buckets in the order
//     they become ready (last layer first). A full bucket is all-reduced
//     (averaged across the p GPUs), or reduce-scattered for Sharded
//     layers, on a communication stream while the backward of the earlier
//     layers goes on, so communication overlaps compute; what is left when
//     the last backward ends is exposed communication.
//
// The step time is compute (Σ Forward + Σ Backward) plus exposed
// communication. A Profile holds only the inputs: parameter counts and
// compute times. It does not model activations, memory, pipeline or tensor
// parallelism, or the optimizer step.
//
// # Compute times
//
// Times are seconds for one step on one GPU. The built-ins derive them from
// FLOPs with FLOPsTimes: forward = 2·params·tokens FLOPs (Kaplan et al.
// 2020), backward = 2× forward, at a peak of H100BF16 (bf16) or H100TF32
// (f32) FLOP/s and an assumed BuiltinMFU of 40%. Embedding layers are a
// table lookup: their parameters count, their compute is taken as 0. The
// attention-score FLOPs that grow with the context length are left out
// (2·n_ctx·d per token per block: about 11% of a GPT-2 small block's FLOPs
// at n_ctx 1024, 4% of a LLaMA-7B block's at 2048 and of a Llama 2 70B
// block's at 4096), so the built-in times are slightly low.
//
// # Built-ins
//
//	name        layers  params          dtype  tokens/GPU  block fwd / bwd       sharded
//	gpt2-small  14      124,439,808     f32    8×1024      0.588 ms / 1.175 ms   no
//	llama-7b    34      6,738,415,616   bf16   2×2048      4.191 ms / 8.382 ms   no
//	llama-70b   82      68,976,648,192  bf16   1×4096      17.72 ms / 35.44 ms   all layers
//
// Each lists its sources in Profile.Sources; the layer-by-layer counts are
// in builtin.go.
//
// # YAML format
//
// Load, Parse and Resolve read, and WriteYAML writes, one profile per file:
//
//	name: my-model                      # required
//	sources: ["where the numbers come from"]  # optional list of strings
//	tokens: 8192                        # optional: tokens per GPU per step
//	peak_tflops: 989                    # optional: device peak, TFLOP/s
//	mfu: 0.4                            # optional: model FLOPs utilisation, (0, 1]
//	layers:                             # required, in forward order
//	  - {name: embed, params: 38597376, dtype: f32, forward: 0, backward: 0}
//	  - {name: block0, params: 7087872, dtype: bf16, forward: 1.2ms, backward: 2.4ms, sharded: true}
//	  - {name: block1, params: 7087872, dtype: bf16}     # times from params
//	  - {name: head, params: 1536, dtype: bf16, flops: 6.3e11}  # times from flops
//
// Layer fields: name (required, unique, printable, at most MaxNameBytes
// bytes); params (required, a whole number > 0; _ separators allowed);
// dtype (required: f32, f64, f16, bf16 or an alias hw.ParseDType knows);
// forward and backward (times with a unit: s, ms, us, µs, ns, ps, or 0;
// parsed by topology.ParseLatency, exactly); flops (forward FLOPs of the
// layer for one step on one GPU); sharded (true or false, default false).
//
// A layer gives its times in one of three ways: forward and backward
// together; flops, giving forward = flops / (peak_tflops·1e12·mfu) and
// backward = 2·forward (needs peak_tflops and mfu); or neither, giving
// FLOPsTimes(params, tokens, peak_tflops·1e12, mfu) (needs all three). A
// layer that gives neither and lacks the figures is an error naming it.
// tokens, peak_tflops and mfu are read only to derive times and are not
// kept in the Profile: WriteYAML writes every time explicitly.
//
// Unknown fields, fields given twice, values of the wrong kind, a second
// document, and anything Validate refuses are errors that name the element
// (layers[i] "name") and, from Parse, the line. Every such error wraps
// ErrInvalid. Parse never panics, whatever the input.
//
// WriteYAML writes a profile so that Parse gives back a profile
// reflect.DeepEqual to it: the times are written with topology.FormatLatency,
// which parses back bit for bit.
package model
