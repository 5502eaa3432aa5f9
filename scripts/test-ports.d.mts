export declare const DEFAULT_PORT_BASE: number;
export declare const PORT_BASE: number;
export declare function testPort(defaultPort: number): number;
export declare const DATABASE_SUFFIX: string;
export declare const PREFIX_SUFFIX: string;
export declare function listening(port: number): Promise<boolean>;
