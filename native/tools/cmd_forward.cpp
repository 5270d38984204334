// moe-engine-dev forward: logits and loss (and optionally every gradient) of one batch, so any tool can
// compare them. Reads input_ids (I32 or I64, [B, T+1]) from a safetensors file; writes
// OUT/logits.safetensors {logits F32 [B,T,V], loss F32 []} and with --grads OUT/grads.safetensors
// {<param name>: gradient of the objective, objective F32 []}. With --grads-dir DIR also DIR/config.json (the
// engine's config) and DIR/model.safetensors holding the gradients as a checkpoint's weights: `moe-engine export`
// of DIR writes them under a Hugging Face model type's names, through the same mapping as the weights.
// --adapter DIR: the checkpoint as the base, a PEFT adapter over it (the logits of the adapted model), under
// --finetune F.json (the config's finetune section), else the section read back from the adapter.
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "engine_handle.h"
#include "train/checkpoint.h"
#include "train/lora_adapter.h"
#include "train/safetensors.h"

int cmd_forward(int argc, char** argv) {
  cli::Args args(argc, argv, {"--checkpoint", "--tokens", "--out", "--threads", "--grads-dir", "--finetune", "--adapter"},
                 {"--grads"});
  const std::string ckpt = args.require("--checkpoint"), out = args.require("--out");
  const std::string tokens_path = args.require("--tokens");

  moe::st::Reader reader(tokens_path);
  const moe::st::TensorInfo* info = reader.find("input_ids");
  if (!info) throw std::runtime_error(tokens_path + ": no tensor named input_ids");
  if (info->shape.size() != 2 || info->shape[1] < 2)
    throw std::runtime_error(tokens_path + ": input_ids must be [B, T+1] with T >= 1, got " +
                             moe::st::shape_str(info->shape));
  const int B = static_cast<int>(info->shape[0]), T = static_cast<int>(info->shape[1]) - 1;
  std::vector<int32_t> ids = reader.read_i32("input_ids");
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      inputs[(size_t)b * T + t] = ids[(size_t)b * (T + 1) + t];
      targets[(size_t)b * T + t] = ids[(size_t)b * (T + 1) + t + 1];
    }

  using moe::json::Value;
  Value train = Value::make_object();
  train.set("batch_size", Value::of(B));
  train.set("seq_len", Value::of(T));
  train.set("threads", Value::of(std::stoi(args.get("--threads", "2"))));
  Value cfg = Value::make_object();
  cfg.set("train", train);
  if (args.has("--finetune")) {
    const std::string path = args.get("--finetune");
    cfg.set("finetune", moe::json::parse(moe::fs::read_file(path, 1 << 20), path));
  } else if (args.has("--adapter")) {
    const moe::ModelConfig m = moe::read_checkpoint_model_config(ckpt);
    cfg.set("finetune", moe::finetune_config_to_json(moe::finetune_of_peft_adapter(args.get("--adapter"), m)));
  }
  cli::Engine engine(moe::json::dump(cfg), ckpt, "", ckpt);
  if (args.has("--adapter")) engine.check(moe_engine_init_from(engine.get(), args.get("--adapter").c_str()));

  const int V = moe_engine_vocab_size(engine.get());
  std::vector<float> logits((size_t)B * T * V);
  double loss = 0, aux = 0;
  engine.check(moe_engine_forward(engine.get(), inputs.data(), targets.data(), B, T, logits.data(), &loss, &aux));
  moe::fs::mkdirs(out);
  float loss_f = static_cast<float>(loss);
  moe::st::Writer lw;
  lw.add_f32("logits", logits.data(), {B, T, V});
  lw.add_f32("loss", &loss_f, {});
  lw.write(moe::fs::join(out, "logits.safetensors"));
  std::printf("loss %.6f aux %.6f\n", loss, aux);

  const std::string grads_dir = args.get("--grads-dir", "");
  if (args.has("--grads") || !grads_dir.empty()) {
    double objective = 0;
    engine.check(moe_engine_compute_gradients(engine.get(), inputs.data(), targets.data(), B, T, &loss, &objective));
    const int n = moe_engine_tensor_count(engine.get());
    std::vector<std::vector<float>> grads(n);
    moe::st::Writer gw, as_weights;
    for (int i = 0; i < n; ++i) {
      const char* name = nullptr;
      int32_t rank = 0;
      int64_t dims[8] = {};
      engine.check(moe_engine_tensor_info(engine.get(), i, &name, &rank, dims));
      std::vector<int64_t> shape(dims, dims + rank);
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      grads[i].resize(numel);
      engine.check(moe_engine_read_tensor(engine.get(), name, 1, grads[i].data(), numel));
      gw.add_f32(name, grads[i].data(), shape);
      as_weights.add_f32(name, grads[i].data(), shape);
    }
    float objective_f = static_cast<float>(objective);
    gw.add_f32("objective", &objective_f, {});
    gw.write(moe::fs::join(out, "grads.safetensors"));
    if (!grads_dir.empty()) {
      moe::fs::mkdirs(grads_dir);
      as_weights.write(moe::fs::join(grads_dir, "model.safetensors"));
      moe::fs::write_file_atomic(moe::fs::join(grads_dir, "config.json"), moe_engine_config_json(engine.get()));
    }
    std::printf("objective %.6f\n", objective);
  }
  return 0;
}
