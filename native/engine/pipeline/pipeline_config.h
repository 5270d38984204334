// How an MoE layer's expert phase is pipelined (MPipeMoE): the number of micro-batches n and the
// memory-reuse strategy. See docs/placement.md for the fields, defaults and ranges.
#pragma once
#include <vector>

#include "pipeline/memory_reuse.h"

namespace moe {

struct PipelineConfig {
  int partitions = 1;                     // n ≥ 1; 0: chosen online by Algorithm 1 ("auto")
  std::vector<int> candidates{1, 2, 4, 8};  // the n tried by "auto"
  ReuseStrategy memory_reuse = ReuseStrategy::None;  // a fixed strategy (None: every partition keeps its buffers)
  bool reuse_auto = false;  // choose S1..S4 by equation 10 from speeds measured on this machine
  bool engaged() const { return partitions != 1 || reuse_auto || memory_reuse != ReuseStrategy::None; }
};

}  // namespace moe
