export declare const ROOT: string;
export declare const CLIENT_DIR: string;
export declare const VENV: string;
export declare const PYTHON: string;
export declare function ensurePythonEnv(options?: { log?: (line: string) => void; quiet?: boolean }): Promise<string>;
