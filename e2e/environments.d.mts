import type defaults from "./environments.json";

type Environments = typeof defaults;
export declare const environments: Environments;
export declare const E2E_DATABASE: string;
export default environments;
