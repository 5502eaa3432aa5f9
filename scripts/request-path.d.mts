import type { IncomingMessage, ServerResponse } from "node:http";
export declare function undecodablePath(target: string | undefined): boolean;
export declare function answerUndecodablePath(req: IncomingMessage, res: ServerResponse): boolean;
