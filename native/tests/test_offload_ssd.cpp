// The SSD tier and the optimizer-mode ablations: cache policies, prefetch, lookahead 0 and no optimizer
// overlap stay bit-identical to resident training; the delayed update is exactly one step stale; the SSD
// cache counts what it does; a model whose expert state is 8× the device budget and 2× the host budget
// trains with the process's resident memory within the budgets.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "huge_pages.h"
#include "offload/ssd_store.h"
#include "test_files.h"
#include "offload_fixture.h"
#include "testing.h"

using namespace offload_test;

namespace {

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// What the kernel's background collapsing into huge pages does in its "madvise" mode, at once: each region of a
// mapping advised for huge pages that holds a written page becomes a whole huge page.
void collapse_advised_huge_pages() {
  std::ifstream f("/proc/self/smaps");
  std::vector<std::pair<unsigned long, unsigned long>> advised;
  unsigned long begin = 0, end = 0;
  for (std::string line; std::getline(f, line);) {
    unsigned long b = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &b, &e) == 2) {
      begin = b;
      end = e;
      continue;
    }
    if (line.rfind("VmFlags:", 0) == 0 && line.find(" hg") != std::string::npos) advised.push_back({begin, end});
  }
  for (auto [b, e] : advised) moe_test::collapse_huge_pages(reinterpret_cast<void*>(b), e - b);
}

// What the resident memory is made of, for a failure message: anonymous, file-backed and shared pages, the part
// of them in transparent huge pages, and the thread count.
std::string rss_breakdown() {
  std::string out;
  for (const char* file : {"/proc/self/status", "/proc/self/smaps_rollup"}) {
    std::ifstream f(file);
    for (std::string line; std::getline(f, line);)
      for (const char* key : {"RssAnon:", "RssFile:", "RssShmem:", "AnonHugePages:", "Threads:"}) {
        long long value = 0;
        if (line.rfind(key, 0) != 0 || std::sscanf(line.c_str() + std::strlen(key), "%lld", &value) != 1) continue;
        const bool kib = line.find("kB") != std::string::npos;
        out += (out.empty() ? "" : ", ") + std::string(key, std::strlen(key) - 1) + " " +
               std::to_string(kib ? value >> 10 : value) + (kib ? " MiB" : "");
      }
  }
  return out;
}

void check_identical(const Run& a, const Run& b, const std::string& what) {
  CHECK_MSG(same_bits(a.losses, b.losses), what + ": losses differ");
  CHECK_MSG(same_bits(a.grad_norms, b.grad_norms), what + ": grad norms differ");
  CHECK_MSG(same_bits(a.params, b.params), what + ": weights differ");
  CHECK_MSG(same_bits(a.m, b.m) && same_bits(a.v, b.v), what + ": moments differ");
}

}  // namespace

TEST(ssd_policies_prefetch_and_ablations_are_exact) {
  for (double clip : {0.0, 1.0}) {
    Variant v{"mixtral", false, clip};
    const Run resident = train(v);
    const std::vector<std::pair<int, std::string>> variants = {
        {1, R"(, "cache_policy": "lfu", "lfu_threshold": 2, "lfu_decay": 0.5, "lfu_decay_every": 16)"},
        {2, R"(, "cache_policy": "next-use")"},
        {1, R"(, "prefetch": false)"},
        {0, ""},
        {1, R"(, "optimizer_overlap": false)"},
        {1, R"(, "optimizer": "layer", "optimizer_overlap": false)"}};
    for (const auto& [lookahead, extra] : variants) {
      Variant o = v;
      const std::string what = " lookahead " + std::to_string(lookahead) + extra;
      o.offload = ssd_offload(0.25, lookahead, extra);
      check_identical(train(o), resident, "ssd" + what);
      if (extra.find("cache_policy") != std::string::npos || extra.find("prefetch") != std::string::npos) continue;
      o.offload = host_offload(0.25, lookahead, 4, extra);
      check_identical(train(o), resident, "host" + what);
    }
  }
}

// ZeRO-Offload's delayed update applies step t's expert gradient at step t + 1: after two delayed steps the
// experts hold exactly what one resident step gives them (both apply the first step's gradient to the initial
// weights with zero moments), and the losses then differ.
TEST(delayed_updates_are_one_step_stale) {
  for (double clip : {0.0, 1.0}) {
    Variant v{"mixtral", false, clip};
    v.grad_accum = 1;
    const Run one = train(v, 1);
    Variant d = v;
    d.offload = host_offload(0.25, 1, 4, R"(, "optimizer": "delayed")");
    const Run two = train(d, 2);
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer probe(cfg, *be);
    bool experts_match = true;
    for (const moe::ExpertRange& r : probe.model().layout().expert_ranges())
      for (size_t i = r.begin; i < r.end; ++i)
        experts_match &= one.params[i] == two.params[i] && one.m[i] == two.m[i] && one.v[i] == two.v[i];
    CHECK_MSG(experts_match, "clip " + std::to_string(clip));
    const Run resident = train(v, 6), delayed = train(d, 6);
    CHECK(resident.losses[0] == delayed.losses[0]);
    CHECK(resident.losses[5] != delayed.losses[5]);
    CHECK(same_bits(delayed.losses, train(d, 6).losses));  // deterministic
  }
}

// 16 experts through 5 cache entries: every step misses, reads and writes whole records, and hits where the
// cache still holds an expert; the host tier holds exactly the cache.
TEST(ssd_cache_counts_its_traffic) {
  for (const char* policy : {"lru", "lfu", "next-use"}) {
    Variant v;
    v.grad_accum = 1;
    v.offload = ssd_offload(0.25, 1, std::string(R"(, "cache_policy": ")") + policy + "\"");
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    feed(t, 3);
    const moe::ExpertOffload& off = *t.offload();
    CHECK(off.cache_entries() == 5);
    for (int s = 0; s < 3; ++s) {
      const moe::StepRecord r = t.step();
      CHECK(r.cache_misses > 0 && r.cache_hits > 0);
      CHECK(r.bytes_ssd_read > 0 && r.bytes_ssd_read % 4096 == 0);
      CHECK(r.bytes_ssd_write > 0 && r.bytes_ssd_write % 4096 == 0);
      CHECK(r.ssd_ms > 0);
      CHECK(r.peak_host_bytes == static_cast<int64_t>(off.host_tier().current()));
      CHECK(r.peak_ssd_bytes == static_cast<int64_t>(off.ssd_tier().current()) && r.peak_ssd_bytes > 0);
      CHECK(r.expert_tiers[0][0] == 2);
    }
  }
}

// Weights that are all bf16 values go to the SSD as their high halves: a read moves half the bytes and gives
// back the same floats; once a write-back holds other floats, the record is whole again.
TEST(ssd_keeps_bf16_exact_weights_in_half_the_bytes) {
  auto be = moe::make_backend("cpu", {1});
  moe::MemoryTier host("host", *be, moe::MemKind::PageableHost, 0), ssd("ssd", *be, moe::MemKind::PageableHost, 0);
  const size_t n = 5000;  // not a multiple of the 4 KiB alignment, in floats or in halves
  moe::SsdExpertStore store(moe::SsdExpertStore::fresh_dir("moe-test-compact"), {{n, 0, 0}, {n, 0, 0}, {n, 0, 0},
                                                                                  {n, 0, 0}, {n, 0, 0}},
                            4, moe::OffloadConfig{}, host, ssd);
  std::vector<float> exact(n), trained(n), back(n);
  for (size_t j = 0; j < n; ++j) {
    const float x = moe::random_uniform(3, 0, j) * 2 - 1;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits &= 0xFFFF0000u;
    std::memcpy(&exact[j], &bits, 4);
    trained[j] = x == 0 ? 1e-3f : x;  // low halves not all zero
  }
  exact[7] = -0.0f;  // signs and zeros survive
  for (int i = 0; i < 5; ++i) store.store(i, {i == 4 ? trained.data() : exact.data()});
  store.flush();
  store.take_stats();
  const size_t half = (n * 2 + 4095) / 4096 * 4096, whole = (n * 4 + 4095) / 4096 * 4096;
  for (int i = 0; i < 5; ++i) {  // 4 entries: expert 0 was evicted by expert 4's store, so every read below misses
    store.load(i, {back.data()});
    CHECK(std::memcmp(back.data(), i == 4 ? trained.data() : exact.data(), n * 4) == 0);
  }
  moe::ExpertStoreStats st = store.take_stats();
  CHECK(st.bytes_read == static_cast<int64_t>(4 * half + whole));
  // Trained floats written back over a compact record make it whole; bf16 values make it compact again.
  for (int round = 0; round < 2; ++round) {
    const std::vector<float>& w = round == 0 ? trained : exact;
    moe::ExpertState s = store.acquire(0, moe::kWeights);
    std::memcpy(s.w, w.data(), n * 4);
    store.release(0, moe::kWeights, moe::kWeights, 0);
    for (int i = 1; i < 5; ++i) store.load(i, {back.data()});  // evicts expert 0: written back
    store.take_stats();
    store.load(0, {back.data()});
    CHECK(std::memcmp(back.data(), w.data(), n * 4) == 0);
    CHECK(store.take_stats().bytes_read == static_cast<int64_t>(round == 0 ? whole : half));
  }
}

TEST(ssd_files_live_in_ssd_dir_and_are_removed) {
  const std::string dir = (std::filesystem::temp_directory_path() / "moe_test_ssd_dir").string();
  std::filesystem::remove_all(dir);
  Variant v;
  v.offload = ssd_offload(0.25, 1, R"(, "ssd_dir": ")" + dir + "\"");
  {
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    CHECK(std::filesystem::exists(dir + "/experts.bin"));
    // A second run on the same directory would write its experts over the first's: refused, the first untouched.
    const auto size = std::filesystem::file_size(dir + "/experts.bin");
    moe_test::expect_error([&] { moe::Trainer second(cfg, *be); }, {"offload.ssd_dir", "in use by another run"},
                           "a second run on the same ssd_dir");
    CHECK(std::filesystem::file_size(dir + "/experts.bin") == size);
    feed(t, v.grad_accum);
    t.step();  // the first still trains
  }
  CHECK(!std::filesystem::exists(dir));
  // A file left by a run that died is reused (its lock went with it), from zeros.
  std::filesystem::create_directories(dir);
  moe_test::write_raw(dir + "/experts.bin", std::string(4096, '\x7f'));
  {
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    feed(t, v.grad_accum);
    CHECK(std::isfinite(t.step().loss));
  }
  std::filesystem::remove_all(dir);
}

// An expert file larger than its disk's free space is refused before anything is written, naming the field and
// both sizes; a failure part way through building the store (here the host budget) leaves the disk and the tiers
// as they were, a stale file of a crashed run included.
TEST(ssd_store_refuses_a_disk_too_small_and_leaves_it_as_it_was) {
  auto be = moe::make_backend("cpu", {1});
  moe::MemoryTier host("host", *be, moe::MemKind::PageableHost, 0), ssd("ssd", *be, moe::MemKind::PageableHost, 0);
  const std::string dir = moe::SsdExpertStore::fresh_dir("moe-test-space");
  const size_t huge = size_t{1} << 43;  // floats: 32 TiB a part, past any disk this runs on
  // {weights, trained apart, gradient} floats: every part of these experts trains.
  const std::vector<moe::ExpertSizes> trained = {{huge, 0, huge}, {1024, 0, 1024}, {1024, 0, 1024}, {1024, 0, 1024}};
  moe_test::expect_error([&] { moe::SsdExpertStore s(dir, trained, 4, moe::OffloadConfig{}, host, ssd); },
                         {"offload.ssd_dir", "expert file needs 140737", dir + " has", "free"}, "a trained store");
  CHECK(!std::filesystem::exists(dir));
  CHECK(host.current() == 0 && ssd.current() == 0);
  // Frozen weights may go compact (half the bytes), so the least the file can need is what is checked.
  const std::vector<moe::ExpertSizes> frozen = {{huge, 0, 0}, {1024, 0, 0}, {1024, 0, 0}, {1024, 0, 0}};
  moe_test::expect_error([&] { moe::SsdExpertStore s(dir, frozen, 4, moe::OffloadConfig{}, host, ssd); },
                         {"offload.ssd_dir", "needs 17592", "at least (35184", "unless the frozen weights"},
                         "a frozen store");
  CHECK(!std::filesystem::exists(dir));
  // A crashed run's file stays as it was.
  std::filesystem::create_directories(dir);
  const std::string stale(8192, '\x5a');
  moe_test::write_raw(dir + "/experts.bin", stale);
  moe_test::expect_error([&] { moe::SsdExpertStore s(dir, trained, 4, moe::OffloadConfig{}, host, ssd); },
                         "offload.ssd_dir", "a trained store beside a stale file");
  std::ifstream in(dir + "/experts.bin", std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == stale);
  std::filesystem::remove_all(dir);
  // A host budget too small for the cache: the expert file made for it is taken away again.
  moe::MemoryTier small_host("host", *be, moe::MemKind::PageableHost, 3 * 4 * 4096 + 1);
  const std::vector<moe::ExpertSizes> small(5, {1024, 0, 1024});
  moe_test::expect_error([&] { moe::SsdExpertStore s(dir, small, 4, moe::OffloadConfig{}, small_host, ssd); },
                         "host cache entry 3", "a host budget of three entries");
  CHECK(!std::filesystem::exists(dir));
  CHECK(small_host.current() == 0 && ssd.current() == 0);

  // What the file may still take on its disk (a run's checkpoint check counts it): every record at first (the file
  // is sparse), less each record as it is written. On a file system without holes the file is whole at once.
  moe::SsdExpertStore fresh(dir, small, 4, moe::OffloadConfig{}, host, ssd);
  const int64_t record = 4 * 4096, all = 5 * record;
  const int64_t first = fresh.disk_bytes_to_come();
  CHECK_MSG(first == all || first == 0, "to come at first: " + std::to_string(first));
  std::vector<float> state(4 * 1024, 0.5f);
  fresh.store(0, {state.data(), nullptr, state.data() + 1024, state.data() + 2048, state.data() + 3072});
  fresh.flush();
  if (first == all) CHECK_MSG(fresh.disk_bytes_to_come() == all - record, std::to_string(fresh.disk_bytes_to_come()));
}

// Expert state 8× the device budget and more than 2× the host budget: the process's resident memory after
// every step stays within device budget + host budget (on the CPU backend both tiers are this process's
// memory) plus 48 MiB for the binary, thread stacks and allocator slack. Before each measurement the huge-page
// regions are collapsed as the kernel would in the background, so the bound does not depend on when it last did.
TEST(ssd_run_larger_than_host_memory_budget_keeps_rss_bounded) {
  const std::string model = R"({"model": {"arch": "mixtral", "vocab_size": 256, "d_model": 256, "n_layers": 4,
      "n_heads": 4, "n_kv_heads": 2, "max_seq_len": 64, "d_ff": 512, "n_experts": 16, "top_k": 2},
    "train": {"batch_size": 2, "seq_len": 64, "steps": 100, "threads": 2, "grad_clip": 1.0},)";
  const int64_t device_budget = 40ll << 20, host_budget = 96ll << 20;
  const std::string cfg_text = model + R"( "offload": {"mode": "ssd", "device_budget_bytes": )" +
                               std::to_string(device_budget) + R"(, "host_budget_bytes": )" +
                               std::to_string(host_budget) + "}}";
  moe::EngineConfig cfg = moe::parse_config_text(cfg_text, "test");
  auto be = moe::make_backend("cpu", {2});
  moe::Trainer t(cfg, *be);
  const moe::ExpertOffload& off = *t.offload();
  const int64_t expert_state = static_cast<int64_t>(off.ssd_tier().current());
  CHECK_MSG(expert_state >= 8 * device_budget && expert_state >= 2 * host_budget,
            "expert state " + std::to_string(expert_state));
  std::vector<int32_t> in(128), tg(128);
  for (int i = 0; i < 128; ++i) in[i] = tg[i] = (i * 37) % 256;
  const int64_t limit = device_budget + host_budget + (48ll << 20);
  double first_loss = 0, last_loss = 0;
  int64_t most = 0;
  for (int s = 0; s < 4; ++s) {
    t.feed_batch(in.data(), tg.data(), 2, 64);
    const moe::StepRecord r = t.step();
    (s == 0 ? first_loss : last_loss) = r.loss;
    collapse_advised_huge_pages();
    CHECK(r.peak_device_bytes <= device_budget && r.peak_host_bytes <= host_budget);
    const int64_t rss = rss_bytes();
    most = std::max(most, rss);
    CHECK_MSG(rss <= limit, "step " + std::to_string(s + 1) + ": RSS " + std::to_string(rss >> 20) + " MiB > " +
                                std::to_string(limit >> 20) + " MiB (" + rss_breakdown() + ")");
  }
  CHECK(last_loss < first_loss);
  std::printf("  expert state %lld MiB, device budget %lld MiB, host budget %lld MiB: RSS at most %lld MiB (%s)\n",
              static_cast<long long>(expert_state >> 20), static_cast<long long>(device_budget >> 20),
              static_cast<long long>(host_budget >> 20), static_cast<long long>(most >> 20),
              rss_breakdown().c_str());
}

TEST_MAIN()
