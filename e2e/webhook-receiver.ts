import { createServer, type Server } from "node:http";
import { verifySignature } from "../lib/notifications/signature";
import { testPort } from "../scripts/test-ports.mjs";

/** Where each server configuration's webhook endpoint points (e2e/idemgate.config.yaml's `${E2E_WEBHOOK_PORT}`). */
export const WEBHOOK_PORTS = { embedded: testPort(4318), servers: testPort(4319) } as const;
export const WEBHOOK_SECRET = "whsec_e2e_5d1f0c9a7b3e42d8";

export function webhookPortOf(project: string): number {
  return WEBHOOK_PORTS[project as keyof typeof WEBHOOK_PORTS] ?? WEBHOOK_PORTS.embedded;
}

export interface ReceivedEvent {
  id: string;
  type: string;
  data: { key: string | null; scope: string | null; summary: string };
}

/** A receiver that answers 200 to deliveries whose signature verifies and 400 to the rest, and keeps what it accepted. */
export class WebhookReceiver {
  readonly events: ReceivedEvent[] = [];
  rejected = 0;
  private server: Server | null = null;

  async start(port: number): Promise<void> {
    this.server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks).toString("utf8");
      if (!verifySignature(req.headers["idemgate-signature"] as string | undefined, body, WEBHOOK_SECRET).ok) {
        this.rejected++;
        res.writeHead(400).end();
        return;
      }
      this.events.push(JSON.parse(body) as ReceivedEvent);
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(port, "127.0.0.1", () => resolve());
    });
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => (this.server ? this.server.close(resolve) : resolve(undefined)));
  }
}
