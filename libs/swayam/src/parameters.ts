/**
 * Swayam's constants (Gujarati et al., Middleware'17, sections 4 and 5; see
 * ../../shared/notes/paper-parameters.md). Everything else takes these as overridable defaults.
 */
export const SWAYAM_DEFAULTS = {
  /** Upper bound on backend provisioning time; also the prediction horizon and the n_F gossip window (section 4.2, 5). */
  tSetupMs: 10_000,
  /** Idle time after which a warm backend decommissions itself (section 4.1; 5 min in the evaluation, Fig. 9). */
  idleTimeoutMs: 300_000,
  /** Minimum time between two scale-ins (section 4.4 RegulateScaleDown; "about ten minutes", section 5.1). */
  scaleInCooldownMs: 600_000,
  /** Rate windows for prediction (section 5: 100 s windows, regression over the last 500 s). */
  rateWindowMs: 100_000,
  rateHistoryMs: 500_000,
  /** Sub-bucket of the sliding rate windows: one regression point (and one fresh prediction) every 10 s (choice). */
  rateBucketMs: 10_000,
  /** Burst threshold U (section 3.3, 5). */
  burstFactor: 2,
  /** SL_min (section 3.3, 5). */
  slMin: 0.99,
  /** SLA metric: windows of 1000 requests slid by 10 (section 5). */
  slaWindowSize: 1000,
  slaWindowStep: 10,
  /** Backends pre-provisioned per service for bootstrapping (section 5). */
  bootstrapBackends: 5,
} as const;
