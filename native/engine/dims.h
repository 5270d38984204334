// Dimension letters used everywhere in the engine (documented once, here):
//   B  batch size (sequences)          T  sequence length (tokens per sequence)
//   N  tokens in a batch, N = B*T      C  model width (d_model)
//   V  vocabulary size                 L  transformer layers
//   NH query heads   NKV key/value heads (GQA; NH % NKV == 0)   HS head size, C = NH*HS
//   F  feed-forward width (dense d_ff, or an expert's d_ff)
//   E  experts in an MoE layer         K  experts per token (top-k)
//   S  expert slots of a dispatch plan (N*K dropless, E*capacity padded)
//   D  devices
// Tensors are row-major fp32 unless a name says otherwise. Linear weights use the PyTorch
// layout w[out, in] (y = x·wᵀ + b), so Hugging Face tensors load without transposes.
// Forward ops overwrite their outputs; backward ops ACCUMULATE (+=) into every gradient they
// are given (a null gradient pointer means "not needed"), so callers zero gradient buffers.
#pragma once
