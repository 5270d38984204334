/* moe_engine: the C API of the MoE training engine. The Node addon and the moe-engine CLI are thin
 * clients of it, so the engine can be driven without Node.
 *
 * Threading: one thread drives an engine (create, load, step or train, save, destroy). moe_engine_request_stop,
 * moe_engine_set_paused and moe_engine_request_checkpoint may be called from any thread; they take effect at
 * step boundaries.
 * Errors: functions returning int give MOE_OK or an error code; moe_engine_last_error() then names the
 * field, file or offset at fault. Nothing on disk is changed by a failed call. */
#ifndef MOE_ENGINE_H
#define MOE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "moe_step_fields.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: versioned structs carry struct_size (moe_step_record first). 3: moe_engine_export_hf_with.
 * 4: moe_engine_measure_experts. 5: moe_export_options.format (PEFT adapters). 6: generation sessions
 * (moe_generation_*). 7: moe_hf_inspect. 8: moe_esft_measure. 9: moe_export_checkpoint. 10: moe_generation_open. */
#define MOE_ENGINE_API_VERSION 11

typedef struct moe_engine moe_engine;

enum moe_status {
  MOE_OK = 0,
  MOE_ERROR = 1,    /* see moe_engine_last_error */
  MOE_STOPPED = 2,  /* a stop was requested; no step was taken */
  MOE_FINISHED = 3  /* train.steps reached; no step was taken */
};

/* Versioned structs (records the engine fills, options it reads) begin with uint32_t struct_size, which the
 * caller sets to sizeof the struct it was built against: `moe_step_record r = {sizeof(moe_step_record)};` (the
 * rest zero). Members are only ever appended, so a smaller struct_size names an older layout: the engine
 * reads and writes only the members that fit inside it (MOE_STRUCT_HAS) and leaves every byte past it alone;
 * a larger one (a newer client) gets the members this engine knows and the rest untouched. struct_size 0 is
 * refused with an error naming it. Structs the engine hands out (moe_train_event and its record) carry the size
 * it filled in, so a client reads only the members both know. */
#define MOE_STRUCT_HAS(type, size, member) (offsetof(type, member) + sizeof(((type*)0)->member) <= (size_t)(size))

/* One training step's telemetry; its members after struct_size are MOE_STEP_RECORD_FIELDS in order (see
 * moe_step_fields.h for each one's unit and meaning). Array pointers stay valid until the next call on the
 * engine. */
typedef struct moe_step_record {
  uint32_t struct_size;
#define MOE_STEP_SCALAR_MEMBER(name, c_type, unit, group, label, meaning) c_type name;
#define MOE_STEP_ARRAY_MEMBER(name, c_type, meaning) c_type name;
  MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_MEMBER, MOE_STEP_ARRAY_MEMBER)
#undef MOE_STEP_SCALAR_MEMBER
#undef MOE_STEP_ARRAY_MEMBER
} moe_step_record;

/* MOE_ENGINE_API_VERSION of the engine linked at run time (the header's may be older or newer). */
int moe_engine_api_version(void);

/* Creates an engine from a JSON config ({"model": ..., "train": ...}). With model omitted, init_dir
 * (may be NULL) supplies the model config from a checkpoint. Returns NULL and writes a message to err. */
moe_engine* moe_engine_create(const char* config_json, const char* init_dir, char* err, size_t err_len);
void moe_engine_destroy(moe_engine* engine);
const char* moe_engine_last_error(const moe_engine* engine);

const char* moe_engine_backend_name(const moe_engine* engine);
/* What the backend is running on and which kernels it chose, e.g. "cpu (2 threads; sgemm avx512, ...)". */
const char* moe_engine_backend_description(const moe_engine* engine);
int64_t moe_engine_num_params(const moe_engine* engine);
int64_t moe_engine_step_count(const moe_engine* engine);
int32_t moe_engine_vocab_size(const moe_engine* engine);
/* The effective config (defaults filled in) as JSON; valid until the next call. */
const char* moe_engine_config_json(moe_engine* engine);

/* Weights from a checkpoint (ours or Hugging Face mixtral/qwen2_moe/olmoe); optimizer starts fresh. */
int moe_engine_init_from(moe_engine* engine, const char* dir);
/* Weights, optimizer moments, step and data cursor from a checkpoint of the same model. */
int moe_engine_resume_from(moe_engine* engine, const char* dir);
int moe_engine_save_checkpoint(moe_engine* engine, const char* dir);

/* Training data: a token shard file (memory-mapped), and/or micro-batches fed ahead of it
 * (inputs and targets are [B, T]; a target of -1 is masked). */
int moe_engine_set_data(moe_engine* engine, const char* token_file);
/* The held-out token shard train.eval_every evaluates on (the step record's eval_loss; NaN on other steps). */
int moe_engine_set_eval_data(moe_engine* engine, const char* token_file);
int moe_engine_feed_batch(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B, int32_t T);

/* One optimizer step (blocks while paused). out (may be NULL) is filled up to its struct_size. */
int moe_engine_step(moe_engine* engine, moe_step_record* out);

/* Forward only: logits_out ([B, T, V] floats) may be NULL; targets may be NULL (then loss_out is 0). */
int moe_engine_forward(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B, int32_t T,
                       float* logits_out, double* loss_out, double* aux_loss_out);
/* Forward + backward of one batch without an update; grads are then readable by name. */
int moe_engine_compute_gradients(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B,
                                 int32_t T, double* loss_out, double* objective_out);
/* Copies the parameter (which = 0) or gradient (which = 1) tensor `name` into dst (numel floats).
 * Tensor names and shapes: moe_engine_tensor_count / moe_engine_tensor_info. */
int moe_engine_read_tensor(moe_engine* engine, const char* name, int which, float* dst, int64_t numel);
int32_t moe_engine_tensor_count(const moe_engine* engine);
/* Name, rank and dims (up to 8) of tensor i; returns MOE_ERROR when i is out of range. */
int moe_engine_tensor_info(const moe_engine* engine, int32_t i, const char** name, int32_t* rank, int64_t dims[8]);

/* Exports the weights (a LoRA run's adapters merged) as a Hugging Face checkpoint of model_type (moe_model_describe lists the types) in dtype
 * MOE_EXPORT_F32, MOE_EXPORT_BF16 or MOE_EXPORT_F16 (the first two are the 0 and 1 of older clients' bf16 flag). */
enum { MOE_EXPORT_F32 = 0, MOE_EXPORT_BF16 = 1, MOE_EXPORT_F16 = 2 };
int moe_engine_export_hf(moe_engine* engine, const char* dir, const char* model_type, int dtype);

/* Export options beyond moe_engine_export_hf's (API version 3). struct_size: set by the caller (fields are only
 * appended; the engine reads what fits). expert_layout: how routed experts are stored: MOE_EXPERTS_DEFAULT (the
 * model type's usual layout: per expert, fused for gpt_oss), MOE_EXPERTS_PER_EXPERT (experts.<e>.gate_proj, ...)
 * or MOE_EXPERTS_FUSED (3-D experts.gate_up_proj / experts.down_proj, as newer transformers writes). MXFP4
 * experts of an imported gpt-oss checkpoint are written decoded, in dtype, without a quantization_config. */
enum { MOE_EXPERTS_DEFAULT = 0, MOE_EXPERTS_PER_EXPERT = 1, MOE_EXPERTS_FUSED = 2 };
/* format (API version 5; older clients' structs end before it and get MOE_EXPORT_CHECKPOINT): the whole model as a
 * Hugging Face checkpoint, a LoRA run's adapters merged into their weights (W + scale·B·A); or MOE_EXPORT_ADAPTER,
 * a LoRA run's PEFT adapter directory (adapter_config.json + adapter_model.safetensors, f32, keys as PEFT writes
 * them for model_type's layout, trained base modules under modules_to_save). An adapter is refused by name where
 * model_type stores the adapted experts fused (gpt_oss): export the merged checkpoint there. */
enum { MOE_EXPORT_CHECKPOINT = 0, MOE_EXPORT_ADAPTER = 1 };
typedef struct moe_export_options {
  uint32_t struct_size;
  int32_t dtype;          /* MOE_EXPORT_F32 | MOE_EXPORT_BF16 | MOE_EXPORT_F16 */
  int32_t expert_layout;  /* MOE_EXPERTS_* */
  int32_t format;         /* MOE_EXPORT_CHECKPOINT | MOE_EXPORT_ADAPTER (API version 5) */
  /* API version 11, may be NULL: the base model folder of the adapter involved. A PEFT adapter export names it in
   * adapter_config.json (base_model_name_or_path, where PEFT and a chat with the adapter folder find the base);
   * a PEFT adapter folder given to moe_export_checkpoint is merged into it (NULL: the base its adapter_config.json
   * names). */
  const char* base_dir;
} moe_export_options;
int moe_engine_export_hf_with(moe_engine* engine, const char* dir, const char* model_type,
                              const moe_export_options* options);
/* A checkpoint directory exported without an engine (API version 9), as moe_engine_export_hf_with would export the
 * model loaded from it: ours is read a tensor at a time from its file as the export reaches it, so a model larger
 * than memory exports in a few tensors' memory; a Hugging Face directory is loaded into a model
 * without a trainer whose routed experts go through an SSD-tier file beside out_dir (removed after), so it too
 * exports in the memory of its non-expert weights and a few experts.
 * MOE_ERROR with the reason in err (err_len bytes, may be 0). */
int moe_export_checkpoint(const char* checkpoint_dir, const char* out_dir, const char* model_type,
                          const moe_export_options* options, char* err, size_t err_len);

/* Expert-specialised fine-tuning's measurement (API version 4): the model's forward only (no backward, no
 * update, the router's own choices) over the first `batches` [train.batch_size, train.seq_len] windows of
 * token_file (fewer when the shard is short; it must hold one), with resident experts (offload.mode "none").
 * Per MoE layer and routed expert: its share of the gate scores (the router's probabilities, each token's
 * normalised to sum 1, summed over tokens, over the layer's total) and of the routed tokens (top-k assignments
 * over N·K); per layer the chosen experts: the smallest set, by descending share of `score` (ties: lower id),
 * whose cumulative share reaches threshold (in (0, 1]).
 * *json_out (valid until the next call on the engine): {"layers": [model layer index per MoE layer],
 * "gate": [[share per expert] per MoE layer], "tokens": [[...]], "batches", "tokens_seen", "threshold",
 * "score": "gate" | "tokens", "experts": {"<model layer index>": [chosen expert ids, ascending]}}. */
enum { MOE_SHARE_GATE = 0, MOE_SHARE_TOKENS = 1 };
typedef struct moe_expert_shares_options {
  uint32_t struct_size;
  const char* token_file;
  int32_t batches;   /* >= 1 */
  int32_t score;     /* MOE_SHARE_GATE | MOE_SHARE_TOKENS: what the chosen set is taken by */
  double threshold;  /* p in (0, 1] */
} moe_expert_shares_options;
int moe_engine_measure_experts(moe_engine* engine, const moe_expert_shares_options* options, const char** json_out);

/* ESFT before a run (API version 8). An engine created with finetune.method "esft" and no finetune.experts is
 * refused ("finetune.experts: ..."): the experts it trains are measured first. This measures them: the model of
 * config_json with its finetune, offload, placement and pipeline sections left out (resident experts, one
 * device), init_dir's weights when given (as moe_engine_create then moe_engine_init_from), over batches windows
 * of token_file, as moe_engine_measure_experts. batches 0, threshold 0 and score MOE_SHARE_CONFIG take the
 * config's finetune.esft (else 32, 0.9, gate). Unless `always`, nothing is measured when the config is not esft
 * or already names finetune.experts.
 * Returns MOE_OK (measured: *config_out is config_json with the chosen set in finetune.experts, *shares_out the
 * measurement's JSON), MOE_FINISHED (nothing to measure: *config_out is config_json, *shares_out "") or MOE_ERROR
 * (message in err). The strings stay valid until the next call on this thread. */
enum { MOE_SHARE_CONFIG = -1 };
typedef struct moe_esft_options {
  uint32_t struct_size;
  const char* config_json;
  const char* init_dir;   /* may be NULL: the model's own initialisation from train.seed */
  const char* token_file; /* the run's training data */
  int32_t batches;
  int32_t score;
  double threshold;
  int32_t always;
} moe_esft_options;
int moe_esft_measure(const moe_esft_options* options, const char** config_out, const char** shares_out, char* err,
                     size_t err_len);

void moe_engine_request_stop(moe_engine* engine);
void moe_engine_set_paused(moe_engine* engine, int paused);

/* Checks every file a checkpoint directory's checksums.json lists (CRC-32, as zlib computes it, and size).
 * Returns MOE_OK when all match, MOE_FINISHED when the directory has no checksums.json (written before
 * checksums existed, or a Hugging Face folder: nothing to check), MOE_ERROR with a message in err naming the
 * file and both checksums otherwise. Loading a checkpoint verifies the files it reads the same way. */
int moe_checkpoint_verify(const char* dir, char* err, size_t err_len);

/* The backends built into this library, as a JSON array of {"name", "description", "usable", "why_not",
 * "validation", "kernels", "bf16_native"} (why_not is empty for a usable one; validation says "validated on <device>
 * (<date>)" or "not validated on <device>" for a usable backend other than "cpu", which train.backend may name only
 * once it is validated: see docs/cuda.md; kernels: those a usable backend picks on this machine, e.g. "sgemm avx512,
 * bf16 gemm amx", empty when it reports none; bf16_native: whether its bf16 compute runs on bf16 units here, false
 * when it computes bf16's bits on fp32 arithmetic, which is then not faster than fp32, or cannot run). The string is
 * static. */
const char* moe_engine_list_backends(void);

/* ---- Options structs and the training loop ----
 * Options structs and the events the loop hands out are versioned structs (struct_size, see above). */

typedef struct moe_engine_options {
  uint32_t struct_size;
  const char* config_json; /* as for moe_engine_create */
  const char* init_dir;    /* may be NULL; as for moe_engine_create */
  /* The run's directory (may be NULL): moe_engine_train writes run_dir/checkpoint-<step> there, and the SSD
   * tier's expert file goes to run_dir/ssd when offload.ssd_dir is not set. */
  const char* run_dir;
  /* API version 11, may be NULL: a folder loaded at open, as moe_engine_init_from (load_resume 0) or
   * moe_engine_resume_from (1) would load it, with the model's weights never drawn from the seed first (only the
   * tensors the folder lacks are): a large model's start-up does not pay for weights the load overwrites. */
  const char* load_dir;
  int32_t load_resume;
} moe_engine_options;

/* moe_engine_create with a run directory (and a folder to load). Returns NULL and writes a message to err. */
moe_engine* moe_engine_open(const moe_engine_options* options, char* err, size_t err_len);

typedef struct moe_train_options {
  uint32_t struct_size;
  int64_t total_steps; /* stop (as finished) after this step; 0 or above train.steps: at train.steps */
} moe_train_options;

enum moe_train_event_kind {
  MOE_TRAIN_STEP = 1,       /* record: the step just taken */
  MOE_TRAIN_CHECKPOINT = 2, /* checkpoint_dir: saved for `step` */
  MOE_TRAIN_DONE = 3,       /* status: MOE_FINISHED, MOE_STOPPED or MOE_ERROR (error: the message) */
  /* The step just reported has a non-finite loss or gradient norm; error: what, the last finite values, the
   * first non-finite gradient and what the loop does (train.on_nonfinite: pause, stop or skip). */
  MOE_TRAIN_NONFINITE = 4
};

typedef struct moe_train_event {
  uint32_t struct_size; /* set by the engine */
  int32_t kind;         /* moe_train_event_kind */
  int64_t step;         /* the engine's step count */
  int64_t last_step;    /* the step training ends at unless stopped */
  const moe_step_record* record;
  const char* checkpoint_dir;
  int32_t status;
  const char* error;
} moe_train_event;

/* Called on the training thread; pointers in the event are valid during the call only. Return 0 to go on;
 * nonzero ends the loop at once, with no further events and no final checkpoint (the listener is gone). */
typedef int (*moe_train_callback)(const moe_train_event* event, void* user);

/* The training loop, on the calling thread: steps until train.steps (or options->total_steps), a stop or an
 * error. Checkpoints go to run_dir/checkpoint-<step> (the engine's run directory, moe_engine_open) every
 * train.checkpoint_every steps, on moe_engine_request_checkpoint (also while paused) and at the end (also
 * after a stop), each step saved once. moe_engine_set_paused and moe_engine_request_stop act at step
 * boundaries. Reports each step and checkpoint, then exactly one MOE_TRAIN_DONE, and returns its status
 * (MOE_OK when the callback ended it early; MOE_ERROR without a DONE event when the arguments are bad). */
int moe_engine_train(moe_engine* engine, const moe_train_options* options, moe_train_callback callback, void* user);

/* Asks moe_engine_train for a checkpoint at the next step boundary (also while paused); any thread. */
void moe_engine_request_checkpoint(moe_engine* engine);

/* The engine's view of a config ({"model": ..., "train": ...}) without creating an engine: JSON with "config"
 * (the effective config, defaults filled in), "features" (what the model's kernels are chosen by), "params"
 * (parameter counts in total, dense, routed experts, per expert and by group, with and without the arena's
 * padding, and the bytes of each fp32 state), with a finetune section "finetune" (trainable, frozen and adapter
 * parameter counts, per group, the trained parameters' gradient and moment bytes and the frozen bytes), "families"
 * and "hf_model_types". Writes it NUL-terminated into
 * out (truncated to out_len - 1 bytes) and returns its full length: call again with a larger buffer when that
 * is >= out_len. On an invalid config returns -1 and writes the message (naming the field) into out. */
int64_t moe_model_describe(const char* config_json, char* out, size_t out_len);

/* ---- Generation (API version 6) ----
 * A generation session runs an engine's model token by token with a key/value cache: feed prompt tokens, then
 * each step samples one token from the last position's logits (feeding the previous step's token first). The
 * session reads the engine's weights as they are when it is created (the SSD home copies the experts then); the
 * engine must outlive it and not train while it generates. Errors: moe_generation_last_error. */
enum { MOE_EXPERTS_RESIDENT = 0, MOE_EXPERTS_HOST = 1, MOE_EXPERTS_SSD = 2 };
typedef struct moe_generate_options {
  uint32_t struct_size;
  double temperature; /* 0: greedy */
  int32_t top_k;      /* 0: every token */
  double top_p;       /* (0, 1]; 0 here means 1 */
  uint64_t seed;      /* a seed replays the same draws */
  /* Where routed experts live while generating: resident in the model, or at home in the host tier (the model's
   * arena) or the SSD tier (a file behind a host cache of cache_experts entries, in ssd_dir or a temporary
   * directory), computing from expert_slots device slots (0: 2 x top_k) that cache the last used experts. An
   * engine whose own experts live apart from its arenas (its offload section's SSD tier) streams them from there
   * through the slots, whatever expert_home says. */
  int32_t expert_home;
  int32_t expert_slots;
  int32_t cache_experts; /* 0: 4 x top_k */
  const char* ssd_dir;   /* may be NULL */
  /* API version 11, moe_generation_open only, may be NULL: when model_dir is a PEFT adapter's folder, the base model
   * folder it adapts (NULL: the one its adapter_config.json names as base_model_name_or_path). */
  const char* base_dir;
} moe_generate_options;

/* One sampled token. experts: [moe_layers x top_k], the experts each MoE layer chose (router order) for the
 * position the token was sampled from; layers: [moe_layers] their model layer indexes. Pointers stay valid until
 * the next call on the session. */
typedef struct moe_generated_token {
  uint32_t struct_size;
  int32_t token;
  int32_t position;  /* the position the token was sampled from */
  int32_t moe_layers, top_k;
  const int32_t* experts;
  const int32_t* layers;
} moe_generated_token;

typedef struct moe_generation moe_generation;
/* Returns NULL on bad options, with the message in moe_engine_last_error(engine). */
moe_generation* moe_generation_create(moe_engine* engine, const moe_generate_options* options);
/* A session on a model folder (ours, a Hugging Face folder, or a PEFT adapter's on its base: options->base_dir or
 * the base its adapter_config.json names, API version 11; API version 10) with no engine: only the model's weights are built, no gradient or optimizer state. Under
 * MOE_EXPERTS_SSD each routed expert goes from the folder's files straight into the SSD tier as it is read, so
 * the experts are never all in memory at once: a model larger than memory can be talked to. config_json (may be
 * NULL) picks the backend, compute dtype, threads and seed with its train section; the model comes from the folder.
 * Returns NULL with the message in err (err_len bytes, may be NULL) when the folder or the options are refused. */
moe_generation* moe_generation_open(const char* model_dir, const char* config_json, const moe_generate_options* options,
                                    char* err, size_t err_len);
void moe_generation_destroy(moe_generation* generation);
const char* moe_generation_last_error(const moe_generation* generation);
/* Appends tokens at the next positions (the prompt, or more of a conversation). */
int moe_generation_feed(moe_generation* generation, const int32_t* tokens, int32_t n);
/* Samples the next token; MOE_FINISHED (out untouched) when the model's max_seq_len is reached. */
int moe_generation_step(moe_generation* generation, moe_generated_token* out);
/* Empties the cache: the next feed starts at position 0, and sampling draws start over. */
int moe_generation_reset(moe_generation* generation);
int32_t moe_generation_position(const moe_generation* generation);
/* Experts copied into slots and served from them since the session began (0 when resident). */
int moe_generation_expert_stats(const moe_generation* generation, int64_t* misses, int64_t* hits,
                                int64_t* bytes_uploaded);
/* A Hugging Face model folder as the import sees it, from config.json and the safetensors headers only (no
 * weight is read; API version 7): JSON with "model_type", "label", "config" (the converted model config),
 * "weights" (single or sharded, each shard present or not, "complete"), "dtypes" (tensor count per stored
 * dtype), "tensors", "bytes", "expert_layout", "expected_tensors", "problems" (every refusal, missing shard,
 * missing, unexpected or misshapen tensor, each naming its file and tensor or field), "notes" (what the import
 * does beyond reading floats: FP8 dequantised, multi-token-prediction layers skipped, MXFP4 decoded) and
 * "supported" (loadable as it is). Output as moe_model_describe's; -1 with the message when dir is not a model
 * folder at all (no config.json or no model_type). */
int64_t moe_hf_inspect(const char* dir, char* out, size_t out_len);

#ifdef __cplusplus
}
#endif

#endif
