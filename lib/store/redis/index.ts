export { RedisKeyStore, createRedisKeyStore, createRedisClusterKeyStore, type RedisKeyStoreOptions } from "./redis-key-store";
export { KeySpace, bucketOf, BUCKET_COUNT, DEFAULT_PREFIX } from "./key-names";
export { InvalidCursorError } from "@/lib/idempotency/errors";
export { UnexpectedRedisReplyError, UnsupportedFilterError } from "./errors";
