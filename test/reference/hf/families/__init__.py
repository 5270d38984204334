"""One module per Hugging Face model type: MODEL_TYPE, cases(), random_tensors(config, rng) and
forward(config, params, ids, margins). See ../hf_check.py."""
