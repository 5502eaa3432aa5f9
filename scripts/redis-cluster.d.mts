// Types for scripts/redis-cluster.mjs, which the cluster tests import.
export declare const DEFAULT_PORTS: number[];

export interface RedisClusterHandle {
  nodes: { host: string; port: number }[];
  ports: number[];
  /** the temporary directory holding every node's files; removed by stop() */
  dir: string;
  pids: number[];
  /** "host:port,host:port,..." as REDIS_CLUSTER_NODES takes it */
  seeds: string;
  /** ends the nodes and removes their directory; safe to call twice */
  stop(): Promise<void>;
}

export declare function findFreePorts(count?: number, from?: number, to?: number): Promise<number[]>;

export declare function startRedisCluster(options?: {
  ports?: number[];
  detached?: boolean;
  redisServer?: string;
  redisCli?: string;
}): Promise<RedisClusterHandle>;
