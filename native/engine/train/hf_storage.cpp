#include "train/hf_storage.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace moe {
namespace {

// transformers' FineGrainedFP8Config: fmt e4m3, weights in blocks (default 128 x 128), activations quantised
// dynamically at inference (a serving choice: the dequantised weights here compute in the engine's own precision).
Fp8Blocks fp8_blocks(const json::Value& q, const std::string& where) {
  if (const json::Value* fmt = q.find("fmt"); fmt && !fmt->is_null() && !(fmt->is_string() && fmt->string == "e4m3"))
    fail(where + ".fmt is " + json::dump(*fmt) + "; only \"e4m3\" FP8 weights are decoded on import");
  if (const json::Value* a = q.find("activation_scheme");
      a && !a->is_null() && !(a->is_string() && a->string == "dynamic"))
    fail(where + ".activation_scheme is " + json::dump(*a) +
         "; only \"dynamic\" is supported (a static scheme stores activation scales the engine has no use for)");
  Fp8Blocks b{128, 128};
  if (const json::Value* w = q.find("weight_block_size"); w && !w->is_null()) {
    const auto whole = [](const json::Value& v) { return v.is_number() && v.number >= 1 && v.number == std::floor(v.number) && v.number < 1e9; };
    if (!w->is_array() || w->array.size() != 2 || !whole(w->array[0]) || !whole(w->array[1]))
      fail(where + ".weight_block_size is " + json::dump(*w) + "; expected [rows, cols], two positive whole numbers");
    b = {static_cast<int64_t>(w->array[0].number), static_cast<int64_t>(w->array[1].number)};
  }
  return b;
}

}  // namespace

bool HfStorage::skipped(const std::string& tensor) const {
  static const std::string prefix = "model.layers.";
  if (mtp_layers == 0 || tensor.compare(0, prefix.size(), prefix) != 0) return false;
  char* end = nullptr;
  const long l = std::strtol(tensor.c_str() + prefix.size(), &end, 10);
  return end != tensor.c_str() + prefix.size() && *end == '.' && l >= mtp_first && l < mtp_first + mtp_layers;
}

HfStorage hf_storage(const json::Value& hf, const std::string& source, const HfFamily& row) {
  HfStorage s;
  const std::string where = source + ": field 'quantization_config'";
  if (const json::Value* q = hf.find("quantization_config"); q && !q->is_null()) {
    const json::Value* method = q->is_object() ? q->find("quant_method") : nullptr;
    const std::string name = method && method->is_string() ? method->string : "";
    if (name == "fp8") s.fp8 = fp8_blocks(*q, where);
    else if (name == "mxfp4" && row.fused == HfFusedExperts::GptOss) s.mxfp4 = true;
    else
      fail(where + " has quant_method " + (method ? json::dump(*method) : std::string("missing")) +
           "; the import decodes only \"fp8\" (block-wise e4m3 weights with weight_scale_inv) and gpt-oss's "
           "\"mxfp4\" experts exactly; the engine cannot reproduce this model, so it cannot be imported");
  }
  if (row.mtp_layers_key)
    if (const json::Value* n = hf.find(row.mtp_layers_key); n && !n->is_null()) {
      if (!n->is_number() || n->number < 0 || n->number != std::floor(n->number) || n->number > 1024)
        fail(source + ": field '" + row.mtp_layers_key + "' must be a non-negative whole number, got " + json::dump(*n));
      const json::Value* layers = hf.find("num_hidden_layers");
      s.mtp_first = layers && layers->is_number() ? static_cast<int>(layers->number) : 0;
      s.mtp_layers = static_cast<int>(n->number);
    }
  return s;
}

std::vector<std::string> hf_storage_notes(const HfStorage& s, const st::TensorSet& ts) {
  size_t fp8 = 0, skipped = 0;
  for (const auto& [name, e] : ts.entries()) {
    if (s.skipped(name)) ++skipped;
    else if (e.info->dtype == st::DType::F8_E4M3) ++fp8;
  }
  std::vector<std::string> notes;
  if (fp8)
    notes.push_back(std::to_string(fp8) + " FP8 (F8_E4M3) weight tensors are dequantised on import with their " +
                    std::to_string(s.fp8.rows) + "x" + std::to_string(s.fp8.cols) +
                    " block scales (weight_scale_inv); training and export use the dequantised values");
  if (s.mxfp4) notes.push_back("MXFP4 expert tensors are decoded on import; export writes them unquantised");
  if (s.mtp_layers) {
    std::string layers = std::to_string(s.mtp_first);
    if (s.mtp_layers > 1) layers += ".." + std::to_string(s.mtp_first + s.mtp_layers - 1);
    notes.push_back("multi-token-prediction layer" + std::string(s.mtp_layers > 1 ? "s " : " ") + "model.layers." +
                    layers + " (" + std::to_string(skipped) +
                    " tensors) skipped, as transformers' DeepseekV3 skips them: the engine trains and exports the "
                    "main model only");
  }
  return notes;
}

}  // namespace moe
