import type { WebhookEndpoint } from "@/lib/notifications/webhook-config";
import { configFilePath, loadToolConfig } from "@/lib/tools/config-file";

/**
 * The `webhooks:` of the configuration file IDEMGATE_CONFIG names, read as the server reads them
 * (secrets from the environment; a file with any error throws its ConfigFileError), for a process
 * that queues events without serving the file's tools: the command line's reconciler pass.
 */
export function configFileWebhooks(env: Record<string, string | undefined> = process.env): readonly WebhookEndpoint[] {
  const file = configFilePath(env);
  return file ? loadToolConfig(file, env).webhooks : [];
}
