#!/usr/bin/python3
"""A stand-in for the engine CLI built on moe_ref.py in float32, to test check_engine.py end to end and to show
that an honest fp32 implementation meets its tolerances:

    /usr/bin/python3 test/reference/check_engine.py --cli test/reference/ref_engine.py

Implements the engine contract check_engine.py relies on (README.md):
    forward --checkpoint DIR --tokens FILE.safetensors --out OUT [--grads]
    train --config CFG.json --data TOKENS.bin --out RUN --init DIR
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_ref  # noqa: E402
import safetensors_io  # noqa: E402
import tokens_io  # noqa: E402


def load_checkpoint(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = moe_ref.resolve_config(json.load(f))
    return config, safetensors_io.read(os.path.join(directory, "model.safetensors"))


def forward_command(args):
    config, params = load_checkpoint(args.checkpoint)
    weights = moe_ref.to_torch(params, torch.float32, requires_grad=args.grads)
    ids = torch.from_numpy(safetensors_io.read(args.tokens)["input_ids"].astype(np.int64))
    out = moe_ref.forward(weights, config["model"], ids[:, :-1], ids[:, 1:])
    os.makedirs(args.out, exist_ok=True)
    safetensors_io.write(os.path.join(args.out, "logits.safetensors"),
                         {"logits": out.logits.detach().numpy(), "loss": out.loss.detach().numpy()})
    if args.grads:
        out.objective.backward()
        grads = {name: (w.grad if w.grad is not None else torch.zeros_like(w)).numpy()
                 for name, w in weights.items()}
        grads["objective"] = out.objective.detach().numpy()
        safetensors_io.write(os.path.join(args.out, "grads.safetensors"), grads)


def train_command(args):
    with open(args.config) as f:
        raw = json.load(f)
    config = moe_ref.resolve_config(raw)
    _, params = load_checkpoint(args.init)
    shard = tokens_io.read(args.data)
    log, final = moe_ref.train(params, config, shard.tokens, shard.mask, dtype=torch.float32)
    final_dir = os.path.join(args.out, "final")
    os.makedirs(final_dir, exist_ok=True)
    with open(os.path.join(args.out, "log.jsonl"), "w") as f:
        for record in log:
            f.write(json.dumps(record) + "\n")
    with open(os.path.join(final_dir, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    safetensors_io.write(os.path.join(final_dir, "model.safetensors"),
                         {name: w.numpy() for name, w in final.items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    forward = commands.add_parser("forward")
    forward.add_argument("--checkpoint", required=True)
    forward.add_argument("--tokens", required=True)
    forward.add_argument("--out", required=True)
    forward.add_argument("--grads", action="store_true")
    train = commands.add_parser("train")
    train.add_argument("--config", required=True)
    train.add_argument("--data", required=True)
    train.add_argument("--out", required=True)
    train.add_argument("--init", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    forward_command(args) if args.command == "forward" else train_command(args)


if __name__ == "__main__":
    main()
