// The telemetry schema as an ordered list of migrations. The database's PRAGMA user_version is the
// number of the last migration applied. Never edit a released migration: append a new one (see
// docs/telemetry-schema.md, "Migration policy").
export interface Migration {
  version: number
  description: string
  sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'runs, steps, expert_loads, events, checkpoints',
    sql: `
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        config TEXT NOT NULL,
        dataset TEXT NOT NULL,
        init TEXT,
        run_dir TEXT NOT NULL,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        step INTEGER NOT NULL DEFAULT 0,
        total_steps INTEGER NOT NULL,
        last_loss REAL,
        tokens_per_s REAL,
        error TEXT
      );
      CREATE INDEX runs_by_created ON runs (created_at);

      CREATE TABLE steps (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        step INTEGER NOT NULL,
        wall_time REAL NOT NULL,
        loss REAL,
        aux_loss REAL,
        lr REAL,
        grad_norm REAL,
        tokens INTEGER,
        tokens_per_s REAL,
        step_ms REAL,
        forward_ms REAL,
        backward_ms REAL,
        optimizer_ms REAL,
        upload_ms REAL,
        upload_hidden_ms REAL,
        stall_ms REAL,
        ssd_ms REAL,
        bytes_h2d INTEGER,
        bytes_d2h INTEGER,
        bytes_ssd_read INTEGER,
        bytes_ssd_write INTEGER,
        cache_hits INTEGER,
        cache_misses INTEGER,
        peak_device_bytes INTEGER,
        peak_host_bytes INTEGER,
        peak_ssd_bytes INTEGER,
        PRIMARY KEY (run_id, step)
      ) WITHOUT ROWID;

      CREATE TABLE expert_loads (
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        tokens BLOB NOT NULL,
        placement BLOB,
        tiers BLOB,
        pins BLOB,
        spilled BLOB,
        PRIMARY KEY (run_id, step),
        FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step) ON DELETE CASCADE
      );

      CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL
      );
      CREATE INDEX events_by_run ON events (run_id, at);

      CREATE TABLE checkpoints (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        step INTEGER NOT NULL,
        path TEXT NOT NULL,
        created_at REAL NOT NULL,
        bytes INTEGER NOT NULL,
        PRIMARY KEY (run_id, step)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 2,
    description: 'expert offload: prefetch lead time per step, the resolved offload of each run',
    sql: `
      ALTER TABLE steps ADD COLUMN prefetch_lead_ms REAL;
      ALTER TABLE runs ADD COLUMN offload TEXT;
    `,
  },
  {
    version: 3,
    description: 'placement across devices: per step and MoE layer, imbalance, spills, weight copies, tokens per device',
    // Keyed by layer first: the replay reads one layer's series over a step range as one contiguous range;
    // the index by step serves one step's read and the cascade from steps.
    sql: `
      CREATE TABLE layer_placements (
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        layer INTEGER NOT NULL,
        imbalance_before REAL NOT NULL,
        imbalance_after REAL NOT NULL,
        spilled_tokens INTEGER NOT NULL,
        moved_experts INTEGER NOT NULL,
        load_before BLOB NOT NULL,
        load_after BLOB NOT NULL,
        PRIMARY KEY (run_id, layer, step),
        FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step) ON DELETE CASCADE
      ) WITHOUT ROWID;
      CREATE INDEX layer_placements_by_step ON layer_placements (run_id, step);
    `,
  },
  {
    version: 4,
    description: 'experts on devices: per step and MoE layer, how the expert phase ran (busy ms per device, critical, wall and predicted ms, bytes moved, partitions, memory reuse); per step, each device’s peak bytes',
    // Nullable: rows from before (and steps whose engine did not measure the execution) read as not measured.
    sql: `
      ALTER TABLE layer_placements ADD COLUMN critical_ms REAL;
      ALTER TABLE layer_placements ADD COLUMN wall_ms REAL;
      ALTER TABLE layer_placements ADD COLUMN predicted_ms REAL;
      ALTER TABLE layer_placements ADD COLUMN token_bytes INTEGER;
      ALTER TABLE layer_placements ADD COLUMN weight_bytes INTEGER;
      ALTER TABLE layer_placements ADD COLUMN offload_bytes INTEGER;
      ALTER TABLE layer_placements ADD COLUMN partitions INTEGER;
      ALTER TABLE layer_placements ADD COLUMN reuse_strategy INTEGER;
      ALTER TABLE layer_placements ADD COLUMN device_busy_ms BLOB;
      ALTER TABLE expert_loads ADD COLUMN device_peak_bytes BLOB;
    `,
  },
  {
    version: 5,
    description: 'SSD tier: the reads’ part of the SSD time per step',
    sql: `
      ALTER TABLE steps ADD COLUMN ssd_read_ms REAL;
    `,
  },
  {
    version: 6,
    description: 'load balancing: each expert’s router selection bias per step',
    // Float64s, one per expert with the layers of `tokens`; NULL for models without a selection bias.
    sql: `
      ALTER TABLE expert_loads ADD COLUMN selection_bias BLOB;
    `,
  },
  {
    version: 7,
    description: 'the held-out loss of the steps that evaluated (NULL on the others)',
    sql: `
      ALTER TABLE steps ADD COLUMN eval_loss REAL;
    `,
  },
  {
    version: 8,
    description: 'expert-specialised fine-tuning: the expert shares measured before the run (JSON), NULL without one',
    sql: `
      ALTER TABLE runs ADD COLUMN expert_shares TEXT;
    `,
  },
]
