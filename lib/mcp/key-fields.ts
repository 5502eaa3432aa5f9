/** The `_meta` field of `tools/call` params that carries the orchestrator's idempotency key. */
export const META_KEY_FIELD = "io.idemgate/idempotency-key";

/**
 * The optional argument every write tool advertises to models. A key a model writes there is
 * advisory (DESIGN.md § Keys from models are advisory): it is removed from the arguments before
 * validation, and identical calls within the tool's window count as one action whatever the key.
 */
export const KEY_ARGUMENT = "idempotency_key";
