import type pg from "pg";
import type { Watch } from "../change-waiters";

/**
 * Changes of key records across server processes on one PostgreSQL database.
 *
 * NOTIFY is not sent for every change: PostgreSQL serialises the commits of all transactions that
 * NOTIFY (one lock for the whole server, held through the commit's WAL flush), which cut the rate
 * of concurrent completions to well under half when every one notified. So a process that waits on
 * a key holds a shared advisory lock on it (WAIT_LOCK_SPACE, hash of `scope \n key`) on its
 * listening connection, and each changing statement tries the exclusive lock on the same key
 * (pg_try_advisory_xact_lock, never waits): only when that fails — somebody waits — does it
 * pg_notify(CHANGE_CHANNEL, scope \n key). A hash collision only costs a notice nobody wants.
 *
 * No change is missed: a waiter LISTENs before it takes its lock, then reads the record once
 * (ChangeWaiters). A change committed before the lock was taken shows in that read; one whose
 * statement ran after it notifies; one whose statement holds the exclusive lock while the waiter
 * tries for the shared one makes the waiter retry shortly (that commit is under way) and then read.
 */
export const CHANGE_CHANNEL = "idemgate_key_changes";
/** first key of the waiters' advisory locks; begin's per-key locks use 0x1de3 */
export const WAIT_LOCK_SPACE = 0x1de4;

/** the listening connection's application_name (pg_stat_activity) */
export const LISTENER_NAME = "idemgate key changes";

/** after losing its connection (or failing to open one), how long the listener waits before it tries again */
const RECONNECT_DELAY_MS = 1_000;
/** a change being committed holds the key's lock for a moment; past this, give up (the waiter times out) */
const MAX_LOCK_ATTEMPTS = 12;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One dedicated connection that LISTENs and holds the waiters' locks, opened on the first watch. */
export class PgChangeListener {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private retryAfterMs = 0;
  private closed = false;

  constructor(
    private readonly open: () => pg.Client,
    /** a notice for `scope \n key` */
    private readonly onChange: (id: string) => void,
    /** the connection dropped: its locks are gone, and with them every watch */
    private readonly onLost: () => void,
  ) {}

  /** Listens for changes of `id` (`scope \n key`) until stopped. */
  watch(id: string): Watch {
    let stopped = false;
    let heldOn: pg.Client | null = null;
    const ready = (async () => {
      const client = await this.connection();
      for (let attempt = 1; ; attempt++) {
        if (stopped) return;
        const { rows } = await client.query<{ held: boolean }>(
          "SELECT pg_try_advisory_lock_shared($1::int, hashtext($2::text)) AS held",
          [WAIT_LOCK_SPACE, id],
        );
        if (rows[0]?.held === true) break;
        if (attempt >= MAX_LOCK_ATTEMPTS) throw new Error(`the waiters' lock on ${JSON.stringify(id)} stayed taken`);
        await sleep(Math.min(2 ** attempt, 100));
      }
      heldOn = client;
      if (stopped) this.unlock(heldOn, id);
    })();
    return {
      ready,
      stop: () => {
        stopped = true;
        if (heldOn) this.unlock(heldOn, id);
        heldOn = null;
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  /** the listening connection, opened (and LISTENing) on first use and after a loss */
  private connection(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the key store is closed"));
    if (this.client) return Promise.resolve(this.client);
    if (this.connecting) return this.connecting;
    if (Date.now() < this.retryAfterMs) return Promise.reject(new Error("the change listener is reconnecting"));
    this.connecting = (async () => {
      const client = this.open();
      const lost = () => this.lost(client);
      client.on("error", lost);
      client.on("end", lost);
      client.on("notification", (msg) => {
        if (msg.channel === CHANGE_CHANNEL && msg.payload !== undefined) this.onChange(msg.payload);
      });
      try {
        await client.connect();
        await client.query(`SET application_name = '${LISTENER_NAME}'`);
        await client.query(`LISTEN ${CHANGE_CHANNEL}`);
      } catch (err) {
        this.retryAfterMs = Date.now() + RECONNECT_DELAY_MS;
        client.end().catch(() => {});
        throw err;
      }
      if (this.closed) {
        client.end().catch(() => {});
        throw new Error("the key store is closed");
      }
      this.client = client;
      return client;
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    this.retryAfterMs = Date.now() + RECONNECT_DELAY_MS;
    client.end().catch(() => {});
    this.onLost();
  }

  private unlock(client: pg.Client, id: string): void {
    // a lost connection took its locks with it
    if (client !== this.client) return;
    client
      .query("SELECT pg_advisory_unlock_shared($1::int, hashtext($2::text))", [WAIT_LOCK_SPACE, id])
      .catch(() => {});
  }
}
