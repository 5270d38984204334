// The SSD-tier home of a model folder's experts (offload/ssd_weights_home.h): with the tensors computed only in
// bf16 kept as bf16 in the records, a read gives them back rounded to bf16 and the rest exactly, and a read of
// bf16 words hands those tensors' words over as stored (the bits the reader would round to) while filling the rest;
// it declines, reading nothing, for a tensor the records keep in fp32, an expert no load wrote, or a home without
// bf16 records.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/half.h"
#include "finetune_fixture.h"
#include "model/config.h"
#include "model/model.h"
#include "offload/ssd_weights_home.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;

TEST(bf16_records_hand_their_words_over_as_stored) {
  auto be = make_backend("cpu", {1});
  // gpt-oss: its experts carry biases, which stay fp32 in the records.
  const EngineConfig cfg = parse_config_text(finetune_test::config(finetune_test::families()[2].second), "test");
  Model model(cfg.model, *be, ComputeDtype::BF16);
  const ParamLayout& layout = model.layout();
  const ExpertRange& r = layout.expert_ranges()[1];
  const FfnParams& f = model.param_ptrs().layers[r.layer].experts[r.expert];
  const float* base = model.params() + r.begin;
  const size_t w_in = f.w_in - base, w_out = f.w_out - base, b_in = f.b_in - base;
  CHECK(f.b_in != nullptr);
  size_t in = 0, out = 0;
  for (const ParamTensor& t : layout.tensors()) {
    if (t.offset == r.begin + w_in) in = t.numel;
    if (t.offset == r.begin + w_out) out = t.numel;
  }
  const size_t floats = r.end - r.begin;
  std::vector<float> values(floats);
  for (size_t i = 0; i < floats; ++i) values[i] = random_uniform(3, 1, i) - 0.5f;

  SsdWeightsHome home(*be, layout, 7, moe_test::tmp_path("ssd_weights_home"), 4, model.bf16_only_tensors());
  home.write_expert(1, kWeights, values.data());
  std::vector<float> read(floats);
  home.read_expert(1, kWeights, read.data());
  bool rounded = true, exact = true;
  for (size_t i = 0; i < in; ++i) rounded = rounded && read[w_in + i] == bf16_to_f32(f32_to_bf16(values[w_in + i]));
  for (size_t i = 0; i < out; ++i) rounded = rounded && read[w_out + i] == bf16_to_f32(f32_to_bf16(values[w_out + i]));
  for (size_t i = 0; i < floats; ++i)
    if ((i < w_in || i >= w_in + in) && (i < w_out || i >= w_out + out)) exact = exact && read[i] == values[i];
  CHECK_MSG(rounded, "the bf16 tensors read back rounded");
  CHECK_MSG(exact, "the rest reads back exactly");

  // The words of both linear tensors, the rest into dst; their places in dst untouched.
  std::vector<uint16_t> words(in + out + 1, 0xBEEF);
  std::vector<float> dst(floats, 42.0f);
  CHECK(home.read_expert_bf16(1, dst.data(), {{w_in, in, words.data()}, {w_out, out, words.data() + in}}));
  bool same = words[in + out] == 0xBEEF;  // nothing past the counts
  for (size_t i = 0; i < in; ++i) same = same && words[i] == f32_to_bf16(values[w_in + i]);
  for (size_t i = 0; i < out; ++i) same = same && words[in + i] == f32_to_bf16(values[w_out + i]);
  CHECK_MSG(same, "the words are the rounded values, and only the counts are written");
  bool rest = true;
  for (size_t i = 0; i < floats; ++i) {
    const bool linear = (i >= w_in && i < w_in + in) || (i >= w_out && i < w_out + out);
    rest = rest && (linear ? dst[i] == 42.0f : dst[i] == values[i]);
  }
  CHECK_MSG(rest, "the other tensors fill dst exactly, the linear ones' places are left");

  // Declined, nothing read: a tensor kept in fp32 (the bias), an expert never written, a home without bf16 records.
  std::fill(dst.begin(), dst.end(), 42.0f);
  CHECK(!home.read_expert_bf16(1, dst.data(), {{w_in, in, words.data()}, {b_in, 1, words.data() + in}}));
  CHECK(!home.read_expert_bf16(0, dst.data(), {{w_in, in, words.data()}}));
  CHECK_MSG(std::all_of(dst.begin(), dst.end(), [](float x) { return x == 42.0f; }), "a declined read wrote dst");
  SsdWeightsHome fp32(*be, layout, 7, moe_test::tmp_path("ssd_weights_home_fp32"), 4);
  fp32.write_expert(1, kWeights, values.data());
  CHECK(!fp32.read_expert_bf16(1, dst.data(), {{w_in, in, words.data()}}));
}

TEST_MAIN()
