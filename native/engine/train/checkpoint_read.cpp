#include "train/checkpoint_read.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/host_memory.h"
#include "train/fp8.h"
#include "train/hf_storage.h"
#include "train/safetensors.h"
#include "train/stored_part.h"

namespace moe {
namespace {

bool is_float_dtype(st::DType t) {
  return t == st::DType::F32 || t == st::DType::BF16 || t == st::DType::F16 || t == st::DType::F64;
}

// Stored tensors a Hugging Face checkpoint may carry that are derived from the config, not weights.
bool is_derived_buffer(const std::string& name) {
  const std::string suffix = ".rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

size_t numel_of(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// A contiguous part (one block of one tensor) into dst.
void read_part(const st::TensorSet& ts, const StoredPart& p, const HfStorage* storage, float* dst) {
  if (storage && stored_as_fp8(ts, p)) {
    const std::vector<float> values = read_fp8_part(ts, p, storage->fp8);
    std::copy(values.begin(), values.end(), dst);
    return;
  }
  const st::TensorSet::Entry* e = ts.find(p.name);
  e->reader->read_f32(*e->info, dst, p.shape);
}

// One expert's slab (leading index e) of a fused part, decoded as it is stored.
std::vector<float> read_slab(const st::TensorSet& ts, const StoredPart& p, const HfStorage* storage, int64_t e) {
  if (stored_as_mxfp4(ts, p)) return read_mxfp4_slab(ts, p, e);
  if (storage && stored_as_fp8(ts, p)) return read_fp8_part(ts, p, storage->fp8, e);
  const st::TensorSet::Entry* x = ts.find(p.name);
  const size_t n = numel_of(p.shape) / static_cast<size_t>(p.shape[0]);
  std::vector<float> slab(n);
  x->reader->read_f32_range(*x->info, slab.data(), static_cast<size_t>(e) * n, n);
  return slab;
}

// A reused host buffer on huge pages (as the arenas): a load's tensors pass through it one at a time, up to the
// largest (a vocabulary's head), which 4 KiB pages would fault in by the hundred thousand.
class HostFloats {
 public:
  HostFloats() = default;
  HostFloats(const HostFloats&) = delete;
  HostFloats& operator=(const HostFloats&) = delete;
  ~HostFloats() { host_free(p_); }
  float* at_least(size_t n) {
    if (n > n_) {
      host_free(p_);
      p_ = static_cast<float*>(host_alloc(n * sizeof(float)));
      check(p_ != nullptr, "checkpoint: cannot allocate " + std::to_string(n * sizeof(float)) +
                               " bytes of host memory to read a tensor through");
      n_ = n;
    }
    return p_;
  }
  void release() {
    host_free(p_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace

void check_stored(const st::TensorSet& ts, const std::vector<ArenaTarget>& targets, const HfStorage* storage,
                  std::vector<std::string>* problems) {
  const std::string fix = "; the checkpoint does not match the model config: build the model from the checkpoint's "
                          "own config.json (read_checkpoint_model_config) or pick the matching checkpoint";
  const bool hf = storage != nullptr;
  const auto problem = [&](const std::string& message) {
    if (!problems) fail(message);
    problems->push_back(message);
  };
  struct Want {
    const StoredPart* part;
    const ParamTensor* param;
  };
  std::map<std::string, Want> want;
  for (const ArenaTarget& t : targets)
    for (const TensorSource& s : *t.sources)
      for (const StoredPart& p : s.parts) want[p.name] = {&p, s.param};

  // A part stored as MXFP4 is present under its _blocks and _scales names instead; an FP8 one beside its scales.
  std::map<std::string, const StoredPart*> companions;
  for (const auto& [name, w] : want)
    if (stored_as_mxfp4(ts, *w.part)) {
      companions[mxfp4_blocks_name(*w.part)] = w.part;
      companions[mxfp4_scales_name(*w.part)] = w.part;
    } else if (hf && stored_as_fp8(ts, *w.part)) {
      companions[fp8_scale_name(name)] = w.part;
    }
  for (const auto& [name, e] : ts.entries())
    if (!want.count(name) && !companions.count(name) && !(hf && (is_derived_buffer(name) || storage->skipped(name))))
      problem(e.reader->path() + ": unexpected tensor '" + name + "' (" + st::dtype_name(e.info->dtype) + " " +
              st::shape_str(e.info->shape) + "): the model has no place for it" + fix);
  for (const auto& [name, w] : want) {
    const st::TensorSet::Entry* e = ts.find(name);
    const std::string target = name == w.param->name ? "" : " (for model tensor '" + w.param->name + "')";
    if (stored_as_mxfp4(ts, *w.part)) {
      try {
        check_mxfp4_part(ts, *w.part);
      } catch (const EngineError& err) {
        problem(err.what());
      }
      continue;
    }
    if (!e) {
      problem(ts.path() + ": tensor '" + name + "'" + target + " is missing; expected shape " +
              st::shape_str(w.part->shape) + fix);
      continue;
    }
    if (hf && stored_as_fp8(ts, *w.part)) {
      try {
        check_fp8_part(ts, *w.part, storage->fp8);
      } catch (const EngineError& err) {
        problem(err.what());
      }
      continue;
    }
    if (!is_float_dtype(e->info->dtype))
      problem(e->reader->path() + ": tensor '" + name + "' has dtype " + st::dtype_name(e->info->dtype) +
              "; weights must be F32, BF16, F16 or F64" + (hf ? " (or F8_E4M3 with block scales)" : "") +
              ": re-export the checkpoint with float weights");
    else if (e->info->shape != w.part->shape)
      problem(e->reader->path() + ": tensor '" + name + "'" + target + " has shape " + st::shape_str(e->info->shape) +
              ", expected " + st::shape_str(w.part->shape) + fix);
  }
}

void read_checked(const st::TensorSet& ts, const std::vector<ArenaTarget>& targets, const HfStorage* storage) {
  check_stored(ts, targets, storage, nullptr);
  const std::vector<ExpertRange> no_experts;
  for (const ArenaTarget& t : targets) {
    const std::vector<ExpertRange>& ranges = t.experts ? *t.experts : no_experts;
    const auto expert_of = [&](size_t at) {
      auto it = std::upper_bound(ranges.begin(), ranges.end(), at,
                                 [](size_t x, const ExpertRange& r) { return x < r.begin; });
      return it != ranges.begin() && at < std::prev(it)->end ? static_cast<int>(std::prev(it) - ranges.begin()) : -1;
    };
    // What each expert reads: a contiguous part at its tensor's offset, or slab e of a fused part.
    struct Read {
      const StoredPart* part;
      size_t tensor;
      int64_t slab;  // -1: contiguous
    };
    std::vector<std::vector<Read>> reads(ranges.size());
    HostFloats scratch;  // one tensor's values on their way to `take`
    for (size_t k = 0; k < t.sources->size(); ++k) {
      const TensorSource& s = (*t.sources)[k];
      const size_t tensor = t.at ? (*t.at)[k] : s.param->offset;
      const bool in_arena = expert_of(tensor) < 0 && !s.parts.empty() &&
                            std::all_of(s.parts.begin(), s.parts.end(), [](const StoredPart& p) { return p.experts.empty(); });
      if (in_arena && t.take && t.takes(tensor, tensor + s.param->numel)) {
        // Its parts cover it: nothing stale is handed over.
        float* values = scratch.at_least(s.param->numel);
        for (const StoredPart& p : s.parts) read_part(ts, p, storage, values + p.offset);
        t.take(tensor, tensor + s.param->numel, values);
        continue;
      }
      for (const StoredPart& p : s.parts) {
        if (!p.experts.empty()) {
          check(!t.at, "checkpoint: a fused expert tensor is read into the parameter layout only");
          for (size_t e = 0; e < p.experts.size(); ++e) {
            const int x = expert_of(p.experts[e]->offset);
            check(x >= 0, "checkpoint: fused tensor '" + p.name + "' spans a tensor outside the routed experts");
            reads[x].push_back({&p, 0, static_cast<int64_t>(e)});
          }
        } else if (const int x = expert_of(tensor); x >= 0) {
          reads[x].push_back({&p, tensor, -1});
        } else {
          read_part(ts, p, storage, t.arena + tensor + p.offset);
        }
      }
    }
    scratch.release();  // the largest tensor's size; an expert needs no more than its range
    std::vector<float> buffer;
    for (size_t x = 0; x < ranges.size(); ++x) {
      if (reads[x].empty()) continue;
      const ExpertRange& r = ranges[x];
      float* dst = t.arena + r.begin;
      const bool take = !t.home && t.take && t.takes(r.begin, r.end);
      if (t.home) {
        buffer.assign(r.end - r.begin, 0.0f);
        dst = buffer.data();
        if (t.partial) t.home->read_expert(static_cast<int>(x), t.part, dst);
      } else if (take) {
        // Not zeroed for every expert: take reads each tensor's own floats, which the reads (or, partial, the
        // arena) fill; the padding between them may hold the previous expert's.
        dst = scratch.at_least(r.end - r.begin);
        if (t.partial) std::copy(t.arena + r.begin, t.arena + r.end, dst);
      }
      for (const Read& rd : reads[x])
        if (rd.slab >= 0)
          scatter_fused_expert(*rd.part, rd.slab, read_slab(ts, *rd.part, storage, rd.slab).data(), dst, r.begin);
        else
          read_part(ts, *rd.part, storage, dst + (rd.tensor - r.begin) + rd.part->offset);
      if (t.home) t.home->write_expert(static_cast<int>(x), t.part, dst);
      else if (take) t.take(r.begin, r.end, dst);
    }
  }
}

ArenaStaging::ArenaStaging(Backend& be, float* arena, size_t floats, const std::vector<ExpertRange>* skip)
    : be_(be), arena_(arena) {
  if (be_.device_memory_is_host()) return;
  host_ = static_cast<float*>(host_alloc_zeroed(std::max<size_t>(floats, 1) * sizeof(float)));
  check(host_ != nullptr, "checkpoint: cannot allocate " + std::to_string(floats * sizeof(float)) +
                              " bytes of host memory to stage a load");
  size_t from = 0;
  for (const ExpertRange& r : skip ? *skip : std::vector<ExpertRange>{}) {
    if (r.begin > from) spans_.push_back({from, r.begin});
    from = std::max(from, r.end);
  }
  if (floats > from) spans_.push_back({from, floats});
  for (const auto& [b, e] : spans_) be_.copy(host_ + b, arena_ + b, (e - b) * sizeof(float));
}

ArenaStaging::~ArenaStaging() {
  if (host_) host_free(host_);
}

void ArenaStaging::put() {
  for (const auto& [b, e] : spans_) be_.copy(arena_ + b, host_ + b, (e - b) * sizeof(float));
}

}  // namespace moe
