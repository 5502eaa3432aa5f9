/** The read-only account each e2e server seeds (IDEMGATE_SEED_VIEWER_PASSWORD, see lib/process/seed.ts). */
export const VIEWER = { email: "viewer@idemgate.local", password: "viewer-e2e-password-0001" };

/** The bearer token each e2e server takes at /api/metrics (IDEMGATE_METRICS_TOKEN), as Prometheus would send it. */
export const METRICS_TOKEN = "metrics-e2e-token-0001-0002-0003-0004";
