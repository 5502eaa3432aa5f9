/** The read-only account each e2e server seeds (IDEMGATE_SEED_VIEWER_PASSWORD, see lib/process/seed.ts). */
export const VIEWER = { email: "viewer@idemgate.local", password: "viewer-e2e-password-0001" };
