/** The configuration file as the status page and /api/health show it. */
export interface ToolConfigStatus {
  /** the file IDEMGATE_CONFIG names; null: none */
  file: string | null;
  /** when the tools now served were read from it */
  loadedAt: Date | null;
  tools: number;
  mcpServers: number;
  /** the last reload that was refused (the tools before it are still served); null once one succeeds */
  reloadError: { at: Date; message: string } | null;
}

// on globalThis: the server's start-up and the console's pages are separate bundles of this module
const holder = globalThis as unknown as { __idemgateToolConfig?: ToolConfigStatus };

/** The server's one ServedTools keeps its status here (and updates it in place). */
export function setToolConfigStatus(status: ToolConfigStatus): void {
  holder.__idemgateToolConfig = status;
}

/** How the configuration file is doing; null when the server was not started with one. */
export function toolConfigStatus(): ToolConfigStatus | null {
  const status = holder.__idemgateToolConfig;
  return status && status.file !== null ? { ...status } : null;
}

