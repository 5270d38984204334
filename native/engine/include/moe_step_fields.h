/* The one list of a training step's record: every member of moe_step_record after struct_size, in ABI order.
 *
 * MOE_STEP_RECORD_FIELDS(SCALAR, ARRAY) expands, in order, to
 *   SCALAR(name, c_type, unit, group, label, meaning)  a per-step number: the engine's StepRecord, the C API's
 *       record, the addon's packing, the CLI's log.jsonl, main/api/step-fields.ts (generated from this list by
 *       scripts/gen-step-fields.mjs) and from it the workbench's decoder, store row, `steps` column, API metric
 *       and chart label;
 *   ARRAY(name, c_type, meaning)  a count or array pointer of the per-layer and per-expert data, which the
 *       engine and its clients fill and read by hand.
 * Groups: "step" and "time" are recorded on every step; those in MOE_STEP_OFFLOAD_ONLY_GROUPS ("offload",
 * "ssd") only when offloaded is 1 (0 in the C record otherwise, absent in the workbench, NULL in SQLite); "ssd"
 * is 0 on the host tier.
 *
 * The order is the C ABI: fields are only ever appended at the end, never reordered or removed, and a new
 * field needs no other change to reach clients (a client built against an older moe_step_record sets a
 * smaller struct_size and gets the prefix it knows). Adding a scalar: append a SCALAR line, set it in its
 * producer (StepRecord's field of the same name), run `node scripts/gen-step-fields.mjs`, and add a `steps`
 * column migration in main/host/store/schema.ts. */
#ifndef MOE_STEP_FIELDS_H
#define MOE_STEP_FIELDS_H

#define MOE_STEP_RECORD_FIELDS(SCALAR, ARRAY)                                                                     \
  SCALAR(step, int64_t, "", "step", "Step", "1-based optimizer step")                                              \
  SCALAR(loss, double, "", "step", "Loss", "mean cross-entropy over the step's target tokens")                    \
  SCALAR(aux_loss, double, "", "step", "Aux loss", "router load-balancing loss")                                   \
  SCALAR(lr, double, "", "step", "Learning rate", "learning rate of the update")                                   \
  SCALAR(grad_norm, double, "", "step", "Gradient norm", "global L2 norm of the gradients")                         \
  SCALAR(tokens, int64_t, "tokens", "step", "Tokens per step", "tokens processed (all micro-batches)")             \
  SCALAR(step_ms, double, "ms", "time", "Step time (ms)", "wall time of the whole step")                           \
  SCALAR(forward_ms, double, "ms", "time", "Forward (ms)", "forward passes")                                       \
  SCALAR(backward_ms, double, "ms", "time", "Backward (ms)", "backward passes")                                    \
  SCALAR(optimizer_ms, double, "ms", "time", "Optimizer (ms)", "gradient clipping and the AdamW update")           \
  ARRAY(n_moe_layers, int32_t, "MoE layers: the length of experts_per_layer")                                     \
  ARRAY(experts_per_layer, const int32_t*, "[n_moe_layers] experts of each MoE layer")                           \
  ARRAY(expert_tokens, const int32_t*, "[sum(experts_per_layer)] tokens per expert, layers concatenated")        \
  ARRAY(offloaded, int32_t, "1 when experts are offloaded: the offload and ssd fields and tier arrays are set")  \
  SCALAR(upload_ms, double, "ms", "offload", "Upload (ms)", "expert weight copy time")                             \
  SCALAR(upload_hidden_ms, double, "ms", "offload", "Upload hidden (ms)", "the part of upload_ms behind compute")  \
  SCALAR(stall_ms, double, "ms", "offload", "Stall (ms)", "compute waiting for uploads")                           \
  SCALAR(bytes_h2d, int64_t, "bytes", "offload", "Bytes host→device", "bytes copied host to device")               \
  SCALAR(bytes_d2h, int64_t, "bytes", "offload", "Bytes device→host", "bytes copied device to host")               \
  SCALAR(peak_device_bytes, int64_t, "bytes", "offload", "Peak device bytes",                                      \
         "device tier booking: non-expert state, activations, expert slots")                                        \
  SCALAR(peak_host_bytes, int64_t, "bytes", "offload", "Peak host bytes",                                          \
         "host tier booking: expert masters or the SSD tier's cache")                                               \
  ARRAY(expert_tiers, const uint8_t*, "[sum(experts_per_layer)] home tier: 0 device, 1 host, 2 SSD")            \
  ARRAY(expert_pinned, const uint8_t*, "[sum(experts_per_layer)] 1 when pinned this step")                      \
  SCALAR(peak_ssd_bytes, int64_t, "bytes", "ssd", "Peak SSD bytes", "SSD tier booking: the expert file")           \
  SCALAR(ssd_ms, double, "ms", "ssd", "SSD (ms)", "expert file I/O time, reads and writes")                         \
  SCALAR(prefetch_lead_ms, double, "ms", "ssd", "Prefetch lead (ms)",                                              \
         "mean time a prefetched expert waited in the host cache before its first use")                            \
  SCALAR(bytes_ssd_read, int64_t, "bytes", "ssd", "Bytes read from SSD", "bytes read from the expert file")        \
  SCALAR(bytes_ssd_write, int64_t, "bytes", "ssd", "Bytes written to SSD", "bytes written to the expert file")     \
  SCALAR(cache_hits, int64_t, "experts", "ssd", "Cache hits", "expert reads served by the host cache")              \
  SCALAR(cache_misses, int64_t, "experts", "ssd", "Cache misses", "expert reads that went to the file")             \
  SCALAR(ssd_read_ms, double, "ms", "ssd", "SSD reads (ms)", "the reads' part of ssd_ms")                          \
  ARRAY(n_devices, int32_t, "devices the experts ran on; 0 (and NULL placement arrays) inside the MoE layer")    \
  ARRAY(imbalance, const double*, "[layers][2] max/mean device load before (static homes) and after placement") \
  ARRAY(device_loads, const int64_t*, "[layers][2][n_devices] tokens per device before and after")             \
  ARRAY(spilled_tokens, const int64_t*, "[layers] tokens computed away from their expert's home device")        \
  ARRAY(moved_experts, const int32_t*, "[layers] weight copies the placement needs")                           \
  ARRAY(expert_device, const int32_t*, "[sum(experts_per_layer)] device of each expert's first rows (-1: none)") \
  ARRAY(device_busy_ms, const double*, "[layers][n_devices] each device's time on its streams")                 \
  ARRAY(layer_ms, const double*, "[layers][3] critical, wall and predicted ms of the expert phase")              \
  ARRAY(layer_bytes, const int64_t*, "[layers][3] token rows, weights + gradients, offloaded activations moved") \
  ARRAY(layer_pipeline, const int32_t*, "[layers][2] partitions n and memory reuse (0 none, 1..4 S1..S4)")       \
  ARRAY(device_peak_bytes, const int64_t*, "[n_devices] the largest each device's buffers grew to")           \
  ARRAY(expert_spilled, const int32_t*, "[sum(experts_per_layer)] tokens of each expert computed off its home") \
  ARRAY(selection_bias, const float*,                                                                            \
        "[sum(experts_per_layer)] each expert's router selection bias after the step (NULL: model has none)") \
  SCALAR(eval_loss, double, "", "eval", "Eval loss", "mean cross-entropy over the held-out data; NaN on steps without evaluation")


/* The groups recorded only on offloaded steps. */
#define MOE_STEP_OFFLOAD_ONLY_GROUPS {"offload", "ssd"}

#ifdef __cplusplus
constexpr bool moe_step_group_offload_only(const char* group) {
  const char* const groups[] = MOE_STEP_OFFLOAD_ONLY_GROUPS;
  for (const char* g : groups) {
    int i = 0;
    while (g[i] && g[i] == group[i]) ++i;
    if (g[i] == group[i]) return true;
  }
  return false;
}
#endif

#endif
