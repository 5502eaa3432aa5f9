export declare const ROOT: string;
export declare const NEXT_BIN: string;
export declare function newestMtimeMs(dir: string): number;
export declare function staleReason(root?: string): string | null;
export declare function run(command: string, args: string[], options?: Record<string, unknown>): Promise<number>;
export declare function buildIfStale(env?: NodeJS.ProcessEnv): Promise<void>;
